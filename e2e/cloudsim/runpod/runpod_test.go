package runpod

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// call posts one GraphQL request with key and returns the status and the
// decoded body.
func call(t *testing.T, url, key, query string, vars map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// firstError returns the message and extensions.code of errors[0].
func firstError(out map[string]any) (msg, code string) {
	errs, _ := out["errors"].([]any)
	if len(errs) == 0 {
		return "", ""
	}
	e, _ := errs[0].(map[string]any)
	msg, _ = e["message"].(string)
	ext, _ := e["extensions"].(map[string]any)
	code, _ = ext["code"].(string)
	return msg, code
}

func TestAPI(t *testing.T) {
	c := testenv.StartCloudSim(t, New())
	url := c.Backend(Name)["endpoint_url"].(string)
	const deploy = `mutation D($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { id } }`
	input := map[string]any{"input": map[string]any{"name": "p", "imageName": "busybox", "gpuTypeId": "NVIDIA H100 80GB HBM3",
		"cloudType": "SECURE", "dataCenterId": "CA-MTL-1", "gpuCount": 1}}

	tests := []struct {
		name   string
		key    string
		faults sim.Faults
		query  string
		vars   map[string]any
		status int
		msg    string
		code   string
	}{
		{name: "a bad key is unauthorized", key: "rpa_wrong", query: `{ myself { id } }`, status: 401, code: "UNAUTHENTICATED"},
		{name: "an unknown field fails validation", query: `{ myself { nosuch } }`, status: 400, code: "GRAPHQL_VALIDATION_FAILED"},
		{name: "a missing variable fails validation", query: deploy, status: 400},
		{name: "the error rate throttles", faults: sim.Faults{ErrorRate: 1}, query: `{ myself { id } }`, status: 429},
		{name: "out of stock is a supply constraint at 200", faults: sim.Faults{Capacity: map[string]int{"NVIDIA H100 80GB HBM3": 0}},
			query: deploy, vars: input, status: 200, code: "SUPPLY_CONSTRAINT",
			msg: "There are no longer any instances available with the requested specifications. Please refresh and try again."},
		{name: "terminating an unknown pod is not found at 200",
			query: `mutation { podTerminate(input: {podId: "nosuch"}) }`, status: 200, msg: "pod not found to terminate"},
		{name: "an unknown pod is null", query: `query { pod(input: {podId: "nosuch"}) { id } }`, status: 200},
		{name: "deleting an unknown network volume is RunPod's nonexistent volume at 200",
			query: `mutation { deleteNetworkVolume(input: {id: "nosuch"}) }`, status: 200, msg: "Tried to delete nonexistent network volume"},
		{name: "a network volume in an unknown datacenter is refused",
			query: `mutation { createNetworkVolume(input: {name: "v", size: 10, dataCenterId: "XX-NO-1"}) { id } }`, status: 200, code: "BAD_USER_INPUT"},
		{name: "a pod with an unknown network volume is refused",
			query: deploy, vars: map[string]any{"input": withVolume(input["input"], "nosuch")}, status: 200, code: "BAD_USER_INPUT",
			msg: "Network volume nosuch not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Faults(tt.faults)
			defer c.Faults(sim.Faults{})
			key := APIKey
			if tt.key != "" {
				key = tt.key
			}
			st, out := call(t, url, key, tt.query, tt.vars)
			msg, code := firstError(out)
			if st != tt.status || (tt.code != "" && code != tt.code) || (tt.msg != "" && msg != tt.msg) {
				t.Errorf("status %d, error %q (%s); want %d %q (%s): %v", st, msg, code, tt.status, tt.msg, tt.code, out)
			}
		})
	}

	st, out := call(t, url, APIKey, `query S($input: GpuLowestPriceInput!) {
		dataCenters { id listed } countryCodes
		gpuTypes { id maxGpuCount lowestPrice(input: $input) { stockStatus minVcpu } alias: displayName }
	}`, map[string]any{"input": map[string]any{"gpuCount": 1, "secureCloud": true, "dataCenterId": "EU-RO-1"}})
	if st != 200 {
		t.Fatalf("gpuTypes: %d %v", st, out)
	}
	data := out["data"].(map[string]any)
	inStock := map[string]bool{}
	for _, g := range data["gpuTypes"].([]any) {
		g := g.(map[string]any)
		inStock[g["id"].(string)] = g["lowestPrice"].(map[string]any)["stockStatus"] != nil
		if g["alias"] == nil {
			t.Errorf("alias not answered: %v", g)
		}
	}
	if !inStock["NVIDIA RTX A4000"] || inStock["NVIDIA H100 80GB HBM3"] || len(data["dataCenters"].([]any)) != 3 {
		t.Errorf("EU-RO-1 stock %v, data centers %v", inStock, data["dataCenters"])
	}
	st, out = call(t, url, APIKey, `mutation { saveRegistryAuth(input: {name: "a", username: "u", password: "p"}) { id name } }`, nil)
	id, _ := out["data"].(map[string]any)["saveRegistryAuth"].(map[string]any)["id"].(string)
	if st != 200 || id == "" {
		t.Fatalf("saveRegistryAuth: %d %v", st, out)
	}
	if st, out := call(t, url, APIKey, `mutation D($id: String!) { deleteRegistryAuth(registryAuthId: $id) }`, map[string]any{"id": id}); st != 200 || out["errors"] != nil {
		t.Errorf("deleteRegistryAuth: %d %v", st, out)
	}
}

// withVolume is a deploy input with networkVolumeId id.
func withVolume(in any, id string) map[string]any {
	out := map[string]any{"networkVolumeId": id, "volumeMountPath": "/data"}
	for k, v := range in.(map[string]any) {
		out[k] = v
	}
	return out
}

// TestAPI_networkVolumes checks the volume shapes dstack reads
// (myself.networkVolumes{id name size dataCenter{id}}) and that a pod goes
// to its volume's datacenter only.
func TestAPI_networkVolumes(t *testing.T) {
	c := testenv.StartCloudSim(t, New())
	url := c.Backend(Name)["endpoint_url"].(string)
	st, out := call(t, url, APIKey, `mutation { createNetworkVolume(input: {name: "data", size: 10, dataCenterId: "EU-RO-1"}) { id name size dataCenterId } }`, nil)
	v, _ := out["data"].(map[string]any)["createNetworkVolume"].(map[string]any)
	if st != 200 || v["id"] == "" || v["name"] != "data" || v["size"] != 10.0 || v["dataCenterId"] != "EU-RO-1" {
		t.Fatalf("createNetworkVolume: %d %v", st, out)
	}
	id := v["id"].(string)
	st, out = call(t, url, APIKey, `{ myself { networkVolumes { id name size dataCenter { id name } } } }`, nil)
	vols, _ := out["data"].(map[string]any)["myself"].(map[string]any)["networkVolumes"].([]any)
	if st != 200 || len(vols) != 1 || vols[0].(map[string]any)["dataCenter"].(map[string]any)["id"] != "EU-RO-1" {
		t.Fatalf("myself.networkVolumes: %d %v", st, out)
	}
	const deploy = `mutation D($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { id } }`
	in := map[string]any{"name": "p", "imageName": "busybox", "gpuTypeId": "NVIDIA RTX A4000", "cloudType": "SECURE", "dataCenterId": "US-TX-3", "gpuCount": 1}
	_, out = call(t, url, APIKey, deploy, map[string]any{"input": withVolume(in, id)})
	if msg, code := firstError(out); code != "BAD_USER_INPUT" || msg != "Network volume "+id+" is in data center EU-RO-1; the pod must be deployed in the same data center, not US-TX-3" {
		t.Errorf("deploy in another datacenter: %q (%s)", msg, code)
	}
	if st, out := call(t, url, APIKey, `mutation D($id: String!) { deleteNetworkVolume(input: {id: $id}) }`, map[string]any{"id": id}); st != 200 || out["errors"] != nil {
		t.Errorf("deleteNetworkVolume: %d %v", st, out)
	}
}
