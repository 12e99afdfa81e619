package runpod

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The GraphQL documents the driver sends. Field names are RunPod's, as
// dstack (src/dstack/_internal/core/backends/runpod/api_client.py), gpuhunt
// (src/gpuhunt/providers/runpod.py), runpodctl (api/pod.go) and
// runpod-python (runpod/api/queries/pods.py) use them; the values go in
// variables, never spliced into the text.

// podFields are the fields of a Pod the driver reads.
const podFields = `
fragment HoistPod on Pod {
  id
  name
  imageName
  desiredStatus
  lastStatusChange
  podType
  costPerHr
  gpuCount
  env
  machineId
  machine { gpuDisplayName }
  runtime {
    uptimeInSeconds
    ports { ip isIpPublic privatePort publicPort type }
  }
}`

// queryCatalog lists the GPU types and the places pods run: secure
// datacenters and community countries (gpuhunt's gpu_types_query).
const queryCatalog = `
query HoistCatalog {
  countryCodes
  dataCenters { id name listed }
  gpuTypes {
    id
    displayName
    manufacturer
    memoryInGb
    maxGpuCount
    securePrice
    communityPrice
    secureSpotPrice
    communitySpotPrice
  }
}`

// stockQuery asks every GPU type's stock in one place for each of counts
// GPUs (gpuhunt's query_pod_types, one lowestPrice per count under the
// alias c<count>): stockStatus is null when there is none. Only the
// aliases vary with counts; the values are variables ($c<count>).
func stockQuery(counts []int) string {
	var b strings.Builder
	b.WriteString("query HoistStock(")
	for i, n := range counts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$c%d: GpuLowestPriceInput!", n)
	}
	b.WriteString(") {\n  gpuTypes {\n    id\n")
	for _, n := range counts {
		fmt.Fprintf(&b, "    c%d: lowestPrice(input: $c%d) { minimumBidPrice uninterruptablePrice minVcpu minMemory stockStatus }\n", n, n)
	}
	b.WriteString("  }\n}")
	return b.String()
}

const queryPod = `
query HoistGetPod($input: PodFilter!) {
  pod(input: $input) { ...HoistPod }
}` + podFields

const queryPods = `
query HoistListPods {
  myself { pods { ...HoistPod } }
}` + podFields

const mutationDeployOnDemand = `
mutation HoistDeploy($input: PodFindAndDeployOnDemandInput!) {
  podFindAndDeployOnDemand(input: $input) { ...HoistPod }
}` + podFields

const mutationDeploySpot = `
mutation HoistDeploySpot($input: PodRentInterruptableInput!) {
  podRentInterruptable(input: $input) { ...HoistPod }
}` + podFields

// mutationEditJob sets a pod's registry auth: the deploy inputs have no
// containerRegistryAuthId, so dstack sets it with podEditJob after the
// deploy (compute.py, run_job), and so does the driver.
const mutationEditJob = `
mutation HoistEditJob($input: PodEditJobInput!) {
  podEditJob(input: $input) { id }
}`

const mutationTerminate = `
mutation HoistTerminate($input: PodTerminateInput!) {
  podTerminate(input: $input)
}`

const mutationSaveRegistryAuth = `
mutation HoistSaveRegistryAuth($input: SaveRegistryAuthInput!) {
  saveRegistryAuth(input: $input) { id name }
}`

const mutationDeleteRegistryAuth = `
mutation HoistDeleteRegistryAuth($id: String!) {
  deleteRegistryAuth(registryAuthId: $id)
}`

// Wire types of the answers.

type wirePort struct {
	IP          string `json:"ip"`
	IsIPPublic  bool   `json:"isIpPublic"`
	PrivatePort int    `json:"privatePort"`
	PublicPort  int    `json:"publicPort"`
	Type        string `json:"type"`
}

type wirePod struct {
	ID               string   `json:"id"`
	Name             string   `json:"name"`
	ImageName        string   `json:"imageName"`
	DesiredStatus    string   `json:"desiredStatus"`
	LastStatusChange string   `json:"lastStatusChange"`
	PodType          string   `json:"podType"`
	CostPerHr        float64  `json:"costPerHr"`
	GPUCount         int      `json:"gpuCount"`
	Env              []string `json:"env"`
	MachineID        string   `json:"machineId"`
	Runtime          *struct {
		UptimeInSeconds int        `json:"uptimeInSeconds"`
		Ports           []wirePort `json:"ports"`
	} `json:"runtime"`
}

type wireGPUType struct {
	ID                 string   `json:"id"`
	DisplayName        string   `json:"displayName"`
	Manufacturer       string   `json:"manufacturer"`
	MemoryInGB         float64  `json:"memoryInGb"`
	MaxGPUCount        int      `json:"maxGpuCount"`
	SecurePrice        *float64 `json:"securePrice"`
	CommunityPrice     *float64 `json:"communityPrice"`
	SecureSpotPrice    *float64 `json:"secureSpotPrice"`
	CommunitySpotPrice *float64 `json:"communitySpotPrice"`
}

type wireCatalog struct {
	CountryCodes []*string `json:"countryCodes"`
	DataCenters  []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Listed bool   `json:"listed"`
	} `json:"dataCenters"`
	GPUTypes []wireGPUType `json:"gpuTypes"`
}

type wireLowestPrice struct {
	MinimumBidPrice      *float64 `json:"minimumBidPrice"`
	UninterruptablePrice *float64 `json:"uninterruptablePrice"`
	MinVcpu              *float64 `json:"minVcpu"`
	MinMemory            *float64 `json:"minMemory"`
	StockStatus          *string  `json:"stockStatus"`
}

// wireStock is stockQuery's answer: each GPU type's id and, under
// c<count>, its lowestPrice.
type wireStock struct {
	GPUTypes []map[string]json.RawMessage `json:"gpuTypes"`
}

// The network volume documents: dstack's (api_client.py,
// get_network_volume, create_network_volume, delete_network_volume).
const volumeFields = `
fragment HoistVolume on NetworkVolume {
  id
  name
  size
  dataCenter { id name }
}`

const queryVolumes = `
query HoistListVolumes {
  myself { networkVolumes { ...HoistVolume } }
}` + volumeFields

const mutationCreateVolume = `
mutation HoistCreateVolume($input: CreateNetworkVolumeInput!) {
  createNetworkVolume(input: $input) { ...HoistVolume }
}` + volumeFields

const mutationDeleteVolume = `
mutation HoistDeleteVolume($input: DeleteNetworkVolumeInput!) {
  deleteNetworkVolume(input: $input)
}`
