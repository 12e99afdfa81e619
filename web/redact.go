package web

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces secret values in rendered specs.
const redacted = "••••••"

// secretKey reports whether a map key or env var name names a secret.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"password", "passwd", "secret", "token", "api_key", "apikey", "private_key", "access_key", "credential", "auth"} {
		if strings.Contains(k, s) {
			return k != "eos_token" && k != "bos_token" && k != "pad_token"
		}
	}
	return false
}

// redactSpec returns the spec pretty-printed with secret values replaced:
// values of secret-looking keys, env entries with secret-looking names, and
// every registry_auth password. Specs that are not JSON are withheld.
func redactSpec(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "(spec is not valid JSON; withheld)"
	}
	v = redactValue(v, "")
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "(spec withheld)"
	}
	return string(b)
}

// redactJSON is redactSpec for API answers: compact JSON.
func redactJSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	b, err := json.Marshal(redactValue(v, ""))
	if err != nil {
		return nil
	}
	return b
}

func redactValue(v any, key string) any {
	switch t := v.(type) {
	case map[string]any:
		// An env entry: {"name": "HF_TOKEN", "value": "..."}.
		if name, ok := t["name"].(string); ok && key == "env" {
			if _, has := t["value"]; has && secretKey(name) {
				t["value"] = redacted
			} else if val, ok := t["value"].(string); ok {
				t["value"] = redactURLPasswords(val)
			}
			return t
		}
		for k, val := range t {
			if secretKey(k) {
				if _, isStr := val.(string); isStr {
					t[k] = redacted
					continue
				}
			}
			t[k] = redactValue(val, k)
		}
		return t
	case []any:
		for i := range t {
			t[i] = redactValue(t[i], key)
		}
		return t
	case string:
		if key == "env" { // "NAME=value" form
			if name, _, ok := strings.Cut(t, "="); ok && secretKey(name) {
				return name + "=" + redacted
			}
		}
		return redactURLPasswords(t)
	}
	return v
}

// urlUserinfo matches the "scheme://user:password@" head of a URL anywhere
// in a text (a DSN in an env value, a clone URL in a command). RFC 3986
// §3.2.1 requires a literal "@" or "/" in a password to be percent-encoded,
// so the password ends at the first "@".
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*):([^\s/?#@]*)@`)

// redactURLPasswords replaces the password of every URL in s. A value that
// is one whole URL goes through net/url, so an unusual but valid one keeps
// its shape; URLs inside a longer text are found by urlUserinfo.
func redactURLPasswords(s string) string {
	if !strings.Contains(s, "@") || !strings.Contains(s, "://") {
		return s
	}
	if u, err := url.Parse(s); err == nil && u.User != nil && !strings.ContainsAny(s, " \t\n") {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
			return strings.Replace(u.String(), url.QueryEscape(redacted), redacted, 1)
		}
	}
	return urlUserinfo.ReplaceAllString(s, "${1}:"+redacted+"@")
}
