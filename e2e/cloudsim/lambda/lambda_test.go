package lambda

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

const pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHb2S1lT6nGk6C1x7sE7w4c0b3m9yqk3bYx0lqZkz8Qp test"

// call makes one API call with key and returns the status and the
// decoded body.
func call(t *testing.T, base, key, method, path string, in any) (int, map[string]any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, base+path, body)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestAPI(t *testing.T) {
	c := testenv.StartCloudSim(t, New())
	base := c.Backend(Name)["endpoint_url"].(string)

	if st, out := call(t, base, "wrong", "GET", "/instances", nil); st != 401 || errCode(out) != "global/invalid-api-key" {
		t.Errorf("bad key: %d %v", st, out)
	}
	st, out := call(t, base, APIKey, "GET", "/instance-types", nil)
	types, _ := out["data"].(map[string]any)
	a10, _ := types["gpu_1x_a10"].(map[string]any)
	if st != 200 || a10 == nil || len(a10["regions_with_capacity_available"].([]any)) == 0 {
		t.Fatalf("instance-types: %d %v", st, a10)
	}
	if st, out := call(t, base, APIKey, "POST", "/ssh-keys", map[string]any{"name": "k1", "public_key": pub}); st != 200 {
		t.Fatalf("add key: %d %v", st, out)
	}
	if st, out := call(t, base, APIKey, "POST", "/ssh-keys", map[string]any{"name": "k1", "public_key": pub}); st != 400 || errCode(out) != "global/invalid-parameters" {
		t.Errorf("duplicate key: %d %v", st, out)
	}
	launch := map[string]any{"region_name": "us-east-1", "instance_type_name": "cpu_4x_general", "ssh_key_names": []string{"k1"},
		"file_system_names": []string{}, "quantity": 1, "name": "vm-1", "image": map[string]string{"family": ImageRoot}}

	c.Faults(sim.Faults{Capacity: map[string]int{"cpu_4x_general": 0}})
	_, out = call(t, base, APIKey, "GET", "/instance-types", nil)
	if n := len(out["data"].(map[string]any)["cpu_4x_general"].(map[string]any)["regions_with_capacity_available"].([]any)); n != 0 {
		t.Errorf("no capacity, yet %d regions with capacity", n)
	}
	if st, out := call(t, base, APIKey, "POST", "/instance-operations/launch", launch); st != 400 || errCode(out) != "instance-operations/launch/insufficient-capacity" {
		t.Errorf("launch without capacity: %d %v", st, out)
	}
	c.Faults(sim.Faults{ErrorRate: 1})
	if st, _ := call(t, base, APIKey, "GET", "/instances", nil); st != 429 {
		t.Errorf("error rate 1: %d", st)
	}
	c.Faults(sim.Faults{})

	st, out = call(t, base, APIKey, "POST", "/instance-operations/launch", launch)
	if st != 200 {
		t.Fatalf("launch: %d %v", st, out)
	}
	id := out["data"].(map[string]any)["instance_ids"].([]any)[0].(string)
	r := c.WaitRunning(Name, id, time.Minute)
	if r.User != "root" || len(r.AuthorizedKeys) != 1 {
		t.Errorf("VM user %q keys %v", r.User, r.AuthorizedKeys)
	}
	_, out = call(t, base, APIKey, "GET", "/instances/"+id, nil)
	in := out["data"].(map[string]any)
	if in["status"] != "active" || in["ip"] != r.Address || in["name"] != "vm-1" {
		t.Errorf("instance %v", in)
	}
	st, out = call(t, base, APIKey, "POST", "/instance-operations/terminate", map[string]any{"instance_ids": []string{id}})
	if st != 200 || len(out["data"].(map[string]any)["terminated_instances"].([]any)) != 1 {
		t.Errorf("terminate: %d %v", st, out)
	}
	if st, out := call(t, base, APIKey, "GET", "/instances/"+id, nil); st != 404 || errCode(out) != "global/object-does-not-exist" {
		t.Errorf("terminated instance: %d %v", st, out)
	}
	if st, _ := call(t, base, APIKey, "POST", "/instance-operations/terminate", map[string]any{"instance_ids": []string{id}}); st != 404 {
		t.Errorf("terminate twice: %d", st)
	}
	_, out = call(t, base, APIKey, "GET", "/ssh-keys", nil)
	kid := out["data"].([]any)[0].(map[string]any)["id"].(string)
	if st, _ := call(t, base, APIKey, "DELETE", "/ssh-keys/"+kid, nil); st != 200 {
		t.Errorf("delete key: %d", st)
	}
	if _, out := call(t, base, APIKey, "GET", "/ssh-keys", nil); len(out["data"].([]any)) != 0 {
		t.Errorf("keys after delete: %v", out)
	}
}
