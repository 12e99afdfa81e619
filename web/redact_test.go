package web

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedactURLPasswords(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"postgres DSN", "postgres://u:p@host/db", "postgres://u:" + redacted + "@host/db"},
		{"DSN with port and query", "postgresql://app:s3cr%2Ft@db.internal:5432/x?sslmode=require", "postgresql://app:" + redacted + "@db.internal:5432/x?sslmode=require"},
		{"user without password is kept", "https://git@example.com/repo.git", "https://git@example.com/repo.git"},
		{"URL inside a command", "git clone https://bot:ghp_abc@example.com/r.git && make", "git clone https://bot:" + redacted + "@example.com/r.git && make"},
		{"two URLs in one line", "a=redis://:pw@r:6379 b=amqp://x:y@q/", "a=redis://:" + redacted + "@r:6379 b=amqp://x:" + redacted + "@q/"},
		{"host with port is not a password", "see https://example.com:8443/a@b", "see https://example.com:8443/a@b"},
		{"no URL", "user:pass@host", "user:pass@host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redactURLPasswords(tt.in); got != tt.want {
				t.Errorf("redactURLPasswords(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactSpec_urlPasswordsEverywhere(t *testing.T) {
	spec := `{"type":"task","env":["DATABASE_URL=postgres://u:hunter2@host/db","PLAIN=1"],` +
		`"commands":["psql postgresql://admin:hunter3@db/x -c 'select 1'"],` +
		`"nested":{"env":[{"name":"CACHE_URL","value":"redis://:hunter4@cache:6379/0"}]},` +
		`"services":{"db":{"url":"mysql://root:hunter5@m/x"}}}`
	for name, out := range map[string]string{"page": redactSpec(json.RawMessage(spec)), "api": string(redactJSON(json.RawMessage(spec)))} {
		t.Run(name, func(t *testing.T) {
			for _, secret := range []string{"hunter2", "hunter3", "hunter4", "hunter5"} {
				if strings.Contains(out, secret) {
					t.Errorf("%s leaks %q:\n%s", name, secret, out)
				}
			}
			for _, kept := range []string{"postgres://u:", "@host/db", "PLAIN=1", "admin:", "@db/x", "mysql://root:"} {
				if !strings.Contains(out, kept) {
					t.Errorf("%s lost %q:\n%s", name, kept, out)
				}
			}
		})
	}
}
