package verda_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/cloudsim/verda"
	"hoist/e2e/testenv"
)

const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG8u8ZrR5UjS3FQmQbQv0G0nGm0yQ1Qm9mC8Yf3c3l8P test"

type api struct {
	t     *testing.T
	base  string
	token string
}

// call makes one API call and returns the status and body.
func (a *api) call(method, path string, in any) (int, string) {
	a.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, body)
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func start(t *testing.T) (*testenv.CloudSim, *api) {
	c := testenv.StartCloudSim(t, verda.New())
	a := &api{t: t, base: c.Backend(verda.Name)["endpoint_url"].(string)}
	code, body := a.call("POST", "/oauth2/token", map[string]string{"grant_type": "client_credentials", "client_id": verda.ClientID, "client_secret": verda.ClientSecret})
	if code != 200 {
		t.Fatalf("token: %d %s", code, body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal([]byte(body), &tok); err != nil || tok.AccessToken == "" || tok.ExpiresIn <= 0 {
		t.Fatalf("token answer %s: %v", body, err)
	}
	a.token = tok.AccessToken
	return c, a
}

func TestAuth(t *testing.T) {
	_, a := start(t)
	anon := &api{t: t, base: a.base}
	code, body := anon.call("POST", "/oauth2/token", map[string]string{"grant_type": "client_credentials", "client_id": verda.ClientID, "client_secret": "no"})
	if code != 401 || !strings.Contains(body, `"code":"unauthorized_request"`) {
		t.Errorf("bad secret: %d %s", code, body)
	}
	if code, body := anon.call("GET", "/instances", nil); code != 401 || !strings.Contains(body, "unauthorized_request") {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, _ := a.call("GET", "/instances", nil); code != 200 {
		t.Errorf("with a token: %d", code)
	}
}

func TestInstanceLifecycle(t *testing.T) {
	c, a := start(t)
	code, keyID := a.call("POST", "/ssh-keys", map[string]string{"name": "k", "key": key})
	if code != 202 || strings.HasPrefix(keyID, "{") || keyID == "" {
		t.Fatalf("ssh key: %d %q, want a plain-text id", code, keyID)
	}
	code, scriptID := a.call("POST", "/scripts", map[string]string{"name": "s.sh", "script": "#!/bin/sh\ntrue\n"})
	if code != 202 || scriptID == "" {
		t.Fatalf("script: %d %q", code, scriptID)
	}
	req := map[string]any{"instance_type": "CPU.4V.16G", "image": "img", "ssh_key_ids": []string{keyID}, "hostname": "h1",
		"description": "d", "startup_script_id": scriptID, "pricing": "FIXED_PRICE", "is_spot": true, "location_code": "FIN-02",
		"os_volume": map[string]any{"name": "OS volume", "size": 60}}
	code, id := a.call("POST", "/instances", req)
	if code != 202 || id == "" {
		t.Fatalf("create: %d %q", code, id)
	}
	r := c.WaitRunning(verda.Name, id, 30*time.Second)
	if len(r.AuthorizedKeys) != 1 || r.AuthorizedKeys[0] != key || r.User != "root" || r.SizeGB != 60 {
		t.Errorf("VM keys %v user %q disk %d", r.AuthorizedKeys, r.User, r.SizeGB)
	}
	code, body := a.call("GET", "/instances/"+id, nil)
	var in map[string]any
	_ = json.Unmarshal([]byte(body), &in)
	if code != 200 || in["status"] != "running" || in["ip"] != r.Address || in["location"] != "FIN-02" || in["is_spot"] != true {
		t.Errorf("get: %d %s", code, body)
	}
	// Verda reclaims the spot instance: discontinued.
	c.Interrupt(id)
	_, body = a.call("GET", "/instances/"+id, nil)
	if !strings.Contains(body, `"status":"discontinued"`) {
		t.Errorf("after the interruption: %s", body)
	}
	if code, body := a.call("PUT", "/instances", map[string]any{"action": "delete", "id": []string{id}, "delete_permanently": true}); code != 202 {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, body := a.call("GET", "/instances/"+id, nil); code != 404 || !strings.Contains(body, "Invalid instance id") {
		t.Errorf("get after delete: %d %s", code, body)
	}
	if code, body := a.call("PUT", "/instances", map[string]any{"action": "delete", "id": []string{id}}); code != 404 {
		t.Errorf("delete again: %d %s", code, body)
	}
	if code, _ := a.call("DELETE", "/ssh-keys", map[string]any{"keys": []string{keyID}}); code != 200 {
		t.Errorf("delete key: %d", code)
	}
	if code, _ := a.call("DELETE", "/scripts/"+scriptID, nil); code != 200 {
		t.Errorf("delete script: %d", code)
	}
	if code, _ := a.call("DELETE", "/scripts/"+scriptID, nil); code != 404 {
		t.Errorf("delete script again: %d", code)
	}
}

func TestCapacityAndErrors(t *testing.T) {
	c, a := start(t)
	c.Faults(sim.Faults{Capacity: map[string]int{"1V100.6V": 0}})
	_, body := a.call("GET", "/instance-availability?is_spot=false", nil)
	if strings.Contains(body, "1V100.6V") || !strings.Contains(body, `"location_code":"FIN-01"`) {
		t.Errorf("availability lists a type without capacity: %s", body)
	}
	_, keyID := a.call("POST", "/ssh-keys", map[string]string{"name": "k", "key": key})
	req := map[string]any{"instance_type": "1V100.6V", "image": "img", "ssh_key_ids": []string{keyID}, "hostname": "h", "description": "", "location_code": "FIN-01", "is_spot": false}
	if code, body := a.call("POST", "/instances", req); code != 503 || !strings.Contains(body, "service_unavailable") {
		t.Errorf("out of capacity: %d %s", code, body)
	}
	req["instance_type"] = "CPU.4V.16G"
	req["ssh_key_ids"] = []string{"nope"}
	if code, body := a.call("POST", "/instances", req); code != 400 || !strings.Contains(body, "invalid_request") {
		t.Errorf("unknown key: %d %s", code, body)
	}
	c.Faults(sim.Faults{ErrorRate: 1})
	if code, body := a.call("GET", "/instances", nil); code != 429 || !strings.Contains(body, "too_many_requests") {
		t.Errorf("rate limited: %d %s", code, body)
	}
}

func TestVolumes(t *testing.T) {
	c, a := start(t)
	_, keyID := a.call("POST", "/ssh-keys", map[string]string{"name": "k", "key": key})
	newInstance := func(host string) string {
		req := map[string]any{"instance_type": "CPU.4V.16G", "image": "img", "ssh_key_ids": []string{keyID}, "hostname": host,
			"description": "", "location_code": "FIN-01", "is_spot": false}
		code, id := a.call("POST", "/instances", req)
		if code != 202 || id == "" {
			t.Fatalf("create instance: %d %q", code, id)
		}
		return id
	}
	inst, other := newInstance("h1"), newInstance("h2")
	c.WaitRunning(verda.Name, inst, 30*time.Second)

	code, id := a.call("POST", "/volumes", map[string]any{"type": "NVMe", "name": "data", "size": 1, "location_code": "FIN-01"})
	if code != 202 || id == "" || strings.HasPrefix(id, "{") {
		t.Fatalf("create volume: %d %q, want a plain-text id", code, id)
	}
	get := func() map[string]any {
		t.Helper()
		code, body := a.call("GET", "/volumes/"+id, nil)
		var v map[string]any
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("get volume: %d %s", code, body)
		}
		return v
	}
	if v := get(); v["status"] != "detached" || v["name"] != "data" || v["size"] != 1.0 || v["type"] != "NVMe" ||
		v["location"] != "FIN-01" || v["instance_id"] != nil || v["target"] != nil || v["is_os_volume"] != false {
		t.Errorf("new volume: %v", v)
	}
	if code, body := a.call("PUT", "/volumes", map[string]any{"action": "attach", "id": id, "instance_id": inst}); code != 202 {
		t.Fatalf("attach: %d %s", code, body)
	}
	v := get()
	target, _ := v["target"].(string)
	if v["status"] != "attached" || v["instance_id"] != inst || !strings.HasPrefix(target, "vd") {
		t.Fatalf("attached volume: %v", v)
	}
	if link, err := os.Readlink("/dev/" + target); err != nil || !strings.HasPrefix(link, "/dev/loop") {
		t.Errorf("/dev/%s links to %q, %v; want a loop device", target, link, err)
	}
	if code, body := a.call("PUT", "/volumes", map[string]any{"action": "attach", "id": id, "instance_id": other}); code != 400 || !strings.Contains(body, "invalid_request") {
		t.Errorf("attach to another instance: %d %s", code, body)
	}
	if code, body := a.call("PUT", "/volumes", map[string]any{"action": "delete", "id": id, "is_permanent": true}); code != 400 {
		t.Errorf("delete attached: %d %s", code, body)
	}
	if code, _ := a.call("GET", "/volumes?status=attached", nil); code != 200 {
		t.Errorf("list attached: %d", code)
	}
	// Deleting the instance detaches the volume.
	if code, body := a.call("PUT", "/instances", map[string]any{"action": "delete", "id": []string{inst}}); code != 202 {
		t.Fatalf("delete instance: %d %s", code, body)
	}
	if v := get(); v["status"] != "detached" || v["instance_id"] != nil {
		t.Errorf("volume after its instance was deleted: %v", v)
	}
	if _, err := os.Lstat("/dev/" + target); !os.IsNotExist(err) {
		t.Errorf("/dev/%s still there after the detach: %v", target, err)
	}
	if code, body := a.call("PUT", "/volumes", map[string]any{"action": "detach", "id": []string{id}}); code != 202 {
		t.Errorf("detach a detached volume: %d %s", code, body)
	}
	if code, body := a.call("PUT", "/volumes", map[string]any{"action": "delete", "id": id, "is_permanent": true}); code != 202 {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, body := a.call("GET", "/volumes/"+id, nil); code != 404 || !strings.Contains(body, "not_found") {
		t.Errorf("get after delete: %d %s", code, body)
	}
	if _, body := a.call("GET", "/volumes", nil); strings.Contains(body, id) {
		t.Errorf("list after delete: %s", body)
	}
	for name, req := range map[string]map[string]any{
		"type":     {"type": "SSD", "name": "x", "size": 1, "location_code": "FIN-01"},
		"size":     {"type": "HDD", "name": "x", "size": 0, "location_code": "FIN-01"},
		"location": {"type": "HDD", "name": "x", "size": 1, "location_code": "MARS-01"},
	} {
		if code, body := a.call("POST", "/volumes", req); code != 400 || !strings.Contains(body, "invalid_request") {
			t.Errorf("bad %s: %d %s", name, code, body)
		}
	}
	c.Faults(sim.Faults{Capacity: map[string]int{"volume": 0}})
	if code, body := a.call("POST", "/volumes", map[string]any{"type": "NVMe", "name": "x", "size": 1, "location_code": "FIN-01"}); code != 503 || !strings.Contains(body, "service_unavailable") {
		t.Errorf("out of capacity: %d %s", code, body)
	}
}
