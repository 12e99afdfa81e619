package backends

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ResourceName returns the provider-visible name of a resource, dstack's
// style hoist-<resource>-<8 hex> (src/dstack/_internal/core/backends/base/compute.py,
// generate_unique_instance_name): resource lowercased with every run of
// characters other than a-z and 0-9 turned into one dash, cut so that the
// whole name fits max, and 8 hex digits of SHA-256(id) so that names are
// unique and the same for the same id (IDSuffix). The result starts with a letter, ends
// with a letter or digit and uses only a-z, 0-9 and dashes: a valid name on
// every provider (GCP's RFC 1035 label, Azure's resource names, EC2 tags).
func ResourceName(resource, id string, max int) string {
	suffix := IDSuffix(id)
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(resource) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	res := b.String()
	room := max - len("hoist-") - len("-") - len(suffix)
	if room <= 0 {
		return ("hoist-" + suffix)[:min(max, len("hoist-")+len(suffix))]
	}
	if len(res) > room {
		res = strings.TrimRight(res[:room], "-")
	}
	if res == "" {
		return "hoist-" + suffix
	}
	return "hoist-" + res + "-" + suffix
}

// IDSuffix is the 8 hex digits of SHA-256(id) that end ResourceName's
// names: a resource whose record was lost is still found by hoist's id.
func IDSuffix(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:4])
}
