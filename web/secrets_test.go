package web

import (
	"context"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
)

// memSecrets keeps secrets in memory for the handler tests; the store's
// encrypted implementation is tested through storeview.
type memSecrets struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memSecrets) ListSecrets(context.Context) ([]Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Secret{}
	for n := range s.m {
		out = append(out, Secret{Name: n, CreatedAt: t0, UpdatedAt: t0})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *memSecrets) GetSecret(_ context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	if !ok {
		return nil, ErrNotFound
	}
	return v, nil
}

func (s *memSecrets) SetSecret(_ context.Context, name string, value []byte, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] = value
	return nil
}

func (s *memSecrets) DeleteSecret(_ context.Context, name, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[name]; !ok {
		return ErrNotFound
	}
	delete(s.m, name)
	return nil
}

const secretValueForTests = "hf_s3cr3t-value-never-listed"

func secretsFixture(t *testing.T) (*fixture, *memSecrets) {
	t.Helper()
	sec := &memSecrets{m: map[string][]byte{"HF_TOKEN": []byte(secretValueForTests)}}
	f := newFixture(t, func(_ *Config, d *Deps) { d.Secrets = sec })
	return f, sec
}

func TestSecretsAPI_listsNamesNeverValues(t *testing.T) {
	f, _ := secretsFixture(t)
	for _, tok := range []string{viewerTok, userTok, adminTok} {
		r := f.do(t, "GET", "/api/v1/secrets", tok, nil)
		body := readBody(t, r)
		if r.StatusCode != 200 || !strings.Contains(body, `"name":"HF_TOKEN"`) || !strings.Contains(body, `"updated_at"`) {
			t.Errorf("list as %s: %d %s", tok, r.StatusCode, body)
		}
		if strings.Contains(body, secretValueForTests) {
			t.Errorf("list as %s carries the value", tok)
		}
	}
}

func TestSecretsAPI_setGetDelete(t *testing.T) {
	f, sec := secretsFixture(t)
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"put sets", "PUT", "/api/v1/secrets/REG_PASS", `{"value":"pw\nline2"}`, 200},
		{"post sets by body name", "POST", "/api/v1/secrets", `{"name":"OTHER","value":"x"}`, 200},
		{"invalid name is refused", "PUT", "/api/v1/secrets/bad.name", `{"value":"x"}`, 400},
		{"names differ", "PUT", "/api/v1/secrets/A", `{"name":"B","value":"x"}`, 400},
		{"not json", "PUT", "/api/v1/secrets/A", `value=leaky`, 400},
		{"unknown field", "PUT", "/api/v1/secrets/A", `{"val":"x"}`, 400},
		{"too large", "PUT", "/api/v1/secrets/A", `{"value":"` + strings.Repeat("a", maxSecretBytes+1) + `"}`, 413},
		{"delete missing", "DELETE", "/api/v1/secrets/NOPE", "", 404},
		{"delete", "DELETE", "/api/v1/secrets/OTHER", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, managerTok, strings.NewReader(tt.body), "Content-Type", "application/json")
			body := readBody(t, r)
			if r.StatusCode != tt.want {
				t.Fatalf("%d %s, want %d", r.StatusCode, body, tt.want)
			}
			if strings.Contains(body, "leaky") {
				t.Errorf("error answer quotes the body: %s", body)
			}
		})
	}
	if v, _ := sec.GetSecret(t.Context(), "REG_PASS"); string(v) != "pw\nline2" {
		t.Errorf("stored %q", v)
	}
	if _, err := sec.GetSecret(t.Context(), "OTHER"); err == nil {
		t.Error("OTHER not deleted")
	}
	r := f.do(t, "GET", "/api/v1/secrets/REG_PASS", adminTok, nil)
	var got SecretValue
	if err := json.NewDecoder(r.Body).Decode(&got); err != nil || got.Value != "pw\nline2" || got.Name != "REG_PASS" {
		t.Errorf("get = %d %+v %v", r.StatusCode, got, err)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	if r := f.do(t, "GET", "/api/v1/secrets/REG_PASS", viewerTok, nil); r.StatusCode != 403 {
		t.Errorf("viewer get: %d, want 403", r.StatusCode)
	}
}

func TestSecretsAPI_unavailableWithoutSecrets(t *testing.T) {
	f := newFixture(t)
	if r := f.do(t, "GET", "/api/v1/secrets", adminTok, nil); r.StatusCode != 501 {
		t.Errorf("list without Secrets: %d, want 501", r.StatusCode)
	}
	if r := f.do(t, "GET", "/secrets", adminTok, nil, "Accept", "text/html"); r.StatusCode != 200 || !strings.Contains(readBody(t, r), "not available") {
		t.Errorf("page without Secrets: %d", r.StatusCode)
	}
}

func TestSecretsPage_writeOnlyFormWithCSRF(t *testing.T) {
	f, sec := secretsFixture(t)
	ck := f.login(t, managerTok)
	cookie := ck.Name + "=" + ck.Value
	page := readBody(t, f.do(t, "GET", "/secrets", "", nil, "Cookie", cookie, "Accept", "text/html"))
	if !strings.Contains(page, "HF_TOKEN") || strings.Contains(page, secretValueForTests) {
		t.Fatalf("page lists the name %v, shows the value %v", strings.Contains(page, "HF_TOKEN"), strings.Contains(page, secretValueForTests))
	}
	if !strings.Contains(page, `<textarea name="value"`) || strings.Contains(page, `<textarea name="value" rows="4" cols="60" spellcheck="false">h`) {
		t.Error("value field missing or prefilled")
	}
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no csrf field")
	}
	form := "application/x-www-form-urlencoded"
	set := url.Values{"name": {"SSH_KEY"}, "value": {"line1\r\nline2\r\n"}}
	if r := f.do(t, "POST", "/secrets", "", strings.NewReader(set.Encode()), "Cookie", cookie, "Content-Type", form); r.StatusCode != 403 {
		t.Errorf("set without csrf: %d, want 403", r.StatusCode)
	}
	set.Set("csrf", m[1])
	r := f.do(t, "POST", "/secrets", "", strings.NewReader(set.Encode()), "Cookie", cookie, "Content-Type", form)
	if r.StatusCode != 303 {
		t.Fatalf("set: %d", r.StatusCode)
	}
	if v, _ := sec.GetSecret(t.Context(), "SSH_KEY"); string(v) != "line1\nline2\n" {
		t.Errorf("stored %q, want LF line ends", v)
	}
	del := url.Values{"csrf": {m[1]}}
	if r := f.do(t, "POST", "/secrets/HF_TOKEN/delete", "", strings.NewReader(del.Encode()), "Cookie", cookie, "Content-Type", form); r.StatusCode != 303 {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	if _, err := sec.GetSecret(t.Context(), "HF_TOKEN"); err == nil {
		t.Error("HF_TOKEN not deleted")
	}
	// A viewer sees names and no form.
	vk := f.login(t, viewerTok)
	vpage := readBody(t, f.do(t, "GET", "/secrets", "", nil, "Cookie", vk.Name+"="+vk.Value, "Accept", "text/html"))
	if !strings.Contains(vpage, "SSH_KEY") || strings.Contains(vpage, "secret-form") || strings.Contains(vpage, "Delete</button>") {
		t.Error("viewer page: want names only, no forms")
	}
}
