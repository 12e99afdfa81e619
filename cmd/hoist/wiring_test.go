package main

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"hoist/backends"
)

func TestLoadServerConfig_rejectsWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown field":            {"backendz:\n  - type: local\n", "backendz"},
		"entry setting unknown":    {"backends:\n  - type: local\n    nmae: x\n", "nmae"},
		"missing type":             {"backends:\n  - name: a\n", "type is required"},
		"duplicate backend":        {"backends:\n  - type: local\n  - name: local\n    type: local\n", "configured twice"},
		"policy typo":              {"policy:\n  privilegd: true\n", "privilegd"},
		"policy granting docker":   {"policy:\n  docker: true\n", "docker"},
		"policy granting the root": {"policy:\n  instance_volumes:\n    - path: /\n", "policy.instance_volumes[0].path: / can never be mounted"},
		"policy for a backend not configured": {"backends:\n  - type: local\npolicy:\n  backends:\n    ssh:\n      privileged: true\n",
			`policy.backends.ssh: no backend "ssh" is configured`},
	} {
		t.Run(name, func(t *testing.T) {
			p := dir + "/" + name + ".yml"
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadServerConfig(p)
			if err == nil {
				_, err = buildPolicy(cfg, dir, "")
			}
			if err == nil {
				// An entry's settings are the driver's to check.
				var bes map[string]backends.Backend
				bes, err = openBackends(cfg, true, nil, dir, nil, nil, slog.New(slog.DiscardHandler))
				closeBackends(bes)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadServerConfig = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if cfg, err := loadServerConfig(""); err != nil || len(cfg.Backends) != 2 {
		t.Fatalf("default config = %+v, %v; want local and ssh", cfg, err)
	}
}
