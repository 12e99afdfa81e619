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
