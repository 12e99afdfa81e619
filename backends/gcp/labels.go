package gcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Label rules (https://cloud.google.com/compute/docs/labeling-resources):
// keys start with a lowercase letter; keys and values use lowercase
// letters, digits, underscores and dashes, at most 63 characters.
const maxLabelLen = 63

// nameRE is an RFC 1035 label, the form of instance, disk, network and
// policy names.
var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// hoistPrefix is what hoist's ownership tag keys (hoist.installation, ...)
// start with; as labels they start with hoistLabelPrefix.
const (
	hoistPrefix      = "hoist."
	hoistLabelPrefix = "hoist_"
)

// labelKey maps a tag key to a label key: hoist.<x> becomes hoist_<x>;
// other keys are lowercased with every other character turned into an
// underscore. "" when nothing valid is left.
func labelKey(k string) string {
	if rest, ok := strings.CutPrefix(k, hoistPrefix); ok {
		k = hoistLabelPrefix + rest
	}
	var b strings.Builder
	for _, r := range strings.ToLower(k) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] < 'a' || out[0] > 'z' {
		return ""
	}
	return out[:min(len(out), maxLabelLen)]
}

// tagKey is labelKey's inverse for hoist's keys: hoist_<x> is hoist.<x>.
func tagKey(l string) string {
	if rest, ok := strings.CutPrefix(l, hoistLabelPrefix); ok {
		return hoistPrefix + rest
	}
	return l
}

// labelValue encodes a tag value as a label value, reversibly: lowercase
// letters, digits and dashes stay, every other byte is _xx (hex), so
// fleet/Gpu becomes fleet_2f_47pu. An encoding longer than 63 characters
// keeps its first 54 and ends with - and 8 hex digits of the value's
// SHA-256: still unique and the same for the same value, but no longer
// decodable.
func labelValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02x", c)
	}
	out := b.String()
	if len(out) <= maxLabelLen {
		return out
	}
	sum := sha256.Sum256([]byte(v))
	return strings.TrimRight(out[:54], "_") + "-" + hex.EncodeToString(sum[:4])
}

// plainLabelValue makes a user's tag value a label value, readably:
// lowercased, every other invalid character an underscore, cut to 63.
func plainLabelValue(v string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(v) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	return out[:min(len(out), maxLabelLen)]
}

// tagValue decodes labelValue; a value that is not an encoding comes back
// as it is.
func tagValue(l string) string {
	if !strings.Contains(l, "_") {
		return l
	}
	var b strings.Builder
	for i := 0; i < len(l); i++ {
		if l[i] == '_' && i+2 < len(l) {
			if x, err := hex.DecodeString(l[i+1 : i+3]); err == nil {
				b.WriteByte(x[0])
				i += 2
				continue
			}
		}
		b.WriteByte(l[i])
	}
	return b.String()
}

// labelsOf returns the labels of a resource: the backend's tags, then the
// given tags (which win).
func (p *Provider) labelsOf(tags map[string]string) map[string]string {
	out := make(map[string]string, len(p.labels)+len(tags))
	for k, v := range p.labels {
		out[k] = v
	}
	for k, v := range encodeTags(tags) {
		out[k] = v
	}
	return out
}

// encodeTags returns tags as labels. Values of hoist's tags (hoist.*) are
// encoded reversibly (labelValue), so that List matches them exactly and
// Get reads them back; other values are made readable label values. A key
// that cannot be a label key is left out.
func encodeTags(tags map[string]string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		lk := labelKey(k)
		switch {
		case lk == "":
		case strings.HasPrefix(k, hoistPrefix):
			out[lk] = labelValue(v)
		default:
			out[lk] = plainLabelValue(v)
		}
	}
	return out
}

// tagsOf reads the ownership tags back from labels: hoist_<x> labels become
// hoist.<x> tags with their values decoded; other labels stay as they are.
func tagsOf(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if strings.HasPrefix(k, hoistLabelPrefix) {
			out[tagKey(k)] = tagValue(v)
		} else {
			out[k] = v
		}
	}
	return out
}

// labelFilter is a list filter matching every tag
// (https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList).
func labelFilter(tags map[string]string) string {
	labels := encodeTags(tags)
	var parts []string
	for _, k := range sortedKeys(labels) {
		parts = append(parts, fmt.Sprintf("(labels.%s = %q)", k, labels[k]))
	}
	return strings.Join(parts, " AND ")
}
