package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func runHoist(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	if errb.Len() > 0 {
		t.Logf("stderr: %s", errb.String())
	}
	return out.String(), err
}

func TestOffersCmd_jsonHasExactlyTheDocumentedKeys(t *testing.T) {
	out, err := runHoist(t, "offers", "--gpu", "A100:80GB:8", "--output", "json", "--limit", "0")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 42 {
		t.Fatalf("got %d offers, want 42", len(rows))
	}
	want := []string{"availability", "backend", "cpus", "disk_gb", "gpu_count", "gpu_memory_gb", "gpu_name",
		"gpu_vendor", "instance", "memory_gb", "price", "region", "spot"}
	for _, r := range rows {
		var keys []string
		for k := range r {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want) {
			t.Fatalf("keys = %v, want %v", keys, want)
		}
	}
	if rows[0]["price"].(float64) != 8.28 || rows[0]["gpu_name"] != "A100" {
		t.Errorf("cheapest offer = %v", rows[0])
	}
}

func TestOffersCmd_emptyResultIsAnEmptyArray(t *testing.T) {
	out, err := runHoist(t, "offers", "--gpu", "MI300X", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("output = %q, want []", out)
	}
}

func TestOffersCmd_textShowsSnapshotDateAndFooter(t *testing.T) {
	out, err := runHoist(t, "offers", "--gpu", "H100:8", "--spot", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prices as of 2026-11-21", "Shown 2 of ", "H100:80GB:8", "yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestOffersCmd_catalogDirAndGroupBy(t *testing.T) {
	dir := t.TempDir()
	csv := "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot\n" +
		"a,r1,1.0,8,32.0,1,L4,24.0,False\n" +
		"b,r2,2.0,16,64.0,2,L4,24.0,False\n" +
		"c,r1,oops,16,64.0,2,L4,24.0,False\n"
	if err := os.WriteFile(filepath.Join(dir, "tiny.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runHoist(t, "offers", "--catalog-dir", dir, "--group-by", "gpu,backend", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var groups []map[string]any
	if err := json.Unmarshal([]byte(out), &groups); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(groups) != 1 || groups[0]["gpu"] != "L4:24GB:1..2" || groups[0]["count"].(float64) != 2 || groups[0]["backend"] != "tiny" {
		t.Errorf("groups = %v", groups)
	}
}

func TestOffersCmd_rejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"offers", "--gpu", "A100:H100"},
		{"offers", "--group-by", "price"},
		{"offers", "--output", "yaml"},
		{"offers", "--spot-policy", "never"},
		{"offers", "--catalog-dir", "/nonexistent"},
		{"offers", "--spot", "--spot-auto"},
		{"offers", "--on-demand", "--spot-auto"},
	} {
		if _, err := runHoist(t, args...); err == nil {
			t.Errorf("hoist %v succeeded", args)
		}
	}
}

func TestOffersCmd_exportDirRoundTripsThroughCatalogDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "export")
	if _, err := runHoist(t, "offers", "--gpu", "H100", "--spot-policy", "auto", "--export-dir", dir); err != nil {
		t.Fatal(err)
	}
	want, err := runHoist(t, "offers", "--gpu", "H100", "--spot-policy", "auto", "--limit", "0", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := runHoist(t, "offers", "--catalog-dir", dir, "--gpu", "H100", "--spot-policy", "auto", "--limit", "0", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("offers read back from the export differ:\nwant %.300s\ngot  %.300s", want, got)
	}
	text, err := runHoist(t, "offers", "--catalog-dir", dir, "--gpu", "H100", "--limit", "1")
	if err != nil || !strings.Contains(text, "prices as of 2026-11-21") {
		t.Errorf("exported snapshot date lost: %v\n%s", err, text)
	}
}

func TestOffersCmd_spotAutoIncludesBothKinds(t *testing.T) {
	out, err := runHoist(t, "offers", "--gpu", "B300", "--backend", "verda", "--spot-auto", "-o", "json", "--limit", "0")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct{ Spot bool }
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	spot := 0
	for _, r := range rows {
		if r.Spot {
			spot++
		}
	}
	if len(rows) != 5 || spot == 0 || spot == len(rows) {
		t.Errorf("got %d offers, %d spot; want 5 mixing both", len(rows), spot)
	}
}
