package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
	"hoist/schema"
	"hoist/store"
)

// unreachableKubeconfig points at a port nothing listens on: the driver
// starts (and logs that the cluster does not answer).
const unreachableKubeconfig = `apiVersion: v1
kind: Config
current-context: x
clusters: [{name: x, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: x, user: u}}]
`

// TestKubernetesBackend_registeredLiveAndPriced: a `kubernetes` entry opens
// through the registry, its offers are the Market's live offers (not the
// catalog's), and plans price a run on it at the configured rates.
func TestKubernetesBackend_registeredLiveAndPriced(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(unreachableKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	cfgYAML := "backends:\n- type: kubernetes\n  name: k8s\n  kubeconfig: {filename: " + kc + "}\n  price: {cpu: 0.5, gpu: 2}\n"
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadServerConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), filepath.Join(dir, "hoist.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bes, err := openBackends(cfg, true, dir, backends.Deps{Records: st, Catalog: func() *offers.Catalog { return offers.New("") }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeBackends(bes)
	if _, ok := bes["k8s"]; !ok {
		t.Fatalf("backends %v lack k8s", backendNames(bes))
	}
	live := liveOffers(cfg, bes)
	if len(live) != 1 || live[0].Name() != "k8s" {
		t.Fatalf("live offer sources = %v, want the k8s backend only", live)
	}

	cat, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	est := estimator(offers.NewMarket(offers.MarketConfig{Catalog: cat}), bes)
	res := schema.Resources{CPU: schema.CPU{Count: schema.Range{Min: ptr(2.0)}}, GPU: schema.GPU{Count: schema.Range{Min: ptr(1.0)}}}
	if v, ok := est(res, schema.Profile{Backends: []string{"k8s"}}); !ok || v != 2*0.5+2 {
		t.Errorf("estimate on k8s = %v, %v; want $3 (2 vCPUs at $0.5, 1 GPU at $2)", v, ok)
	}
}

func ptr[T any](v T) *T { return &v }

// TestOffersCmd_configListsTheClustersNodes: `hoist offers --config` lists
// a slice of the test cluster's node next to the catalog's offers.
func TestOffersCmd_configListsTheClustersNodes(t *testing.T) {
	k := testenv.Kubernetes(t)
	k.LockNode(t) // other tests' pods take the node's free CPUs
	kc := k.Kubeconfig
	cfg := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfg, []byte("backends:\n- type: kubernetes\n  kubeconfig: {filename: "+kc+"}\n  price: {cpu: 0.001}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Pods of other test binaries (which do not take the node lock) may
	// hold the node's CPUs for a while: the node is offered once one is
	// free again.
	var rows []map[string]any
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		out, err := runHoist(t, "offers", "--config", cfg, "--cpu", "1..", "--gpu", "0", "--backend", "kubernetes", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("output is not a JSON array: %v\n%s", err, out)
		}
		if len(rows) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(rows) == 0 || rows[0]["backend"] != "kubernetes" || rows[0]["cpus"].(float64) != 1 || rows[0]["price"].(float64) != 0.001 {
		t.Fatalf("offers = %v, want a 1-CPU slice of a node of backend kubernetes at $0.001", rows)
	}
}
