package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Ownership on Kubernetes objects. Every object the driver creates (pods,
// secrets, persistent volume claims) carries the ownership tags twice: as
// labels, to select by (a tag value that is no valid label value, such as
// "fleet/gpu", is replaced by a digest of it), and verbatim as JSON in the
// tagsAnnotation, to read back.
const (
	// managedByLabel marks every object hoist creates
	// (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "hoist"
	// tagsAnnotation holds the ownership tags as a JSON object.
	tagsAnnotation = "hoist.dev/tags"
	// taskLabel names the shim task (the job id) a pod or secret is for.
	taskLabel = "hoist.task"
)

// labelValue returns v when it is a valid label value, else a digest of it
// ("h-" and 40 hex digits), so that a selector on the value still matches.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:20])
}

// tagLabels returns the labels for tags, with managedByLabel.
func tagLabels(tags map[string]string) map[string]string {
	out := map[string]string{managedByLabel: managedByValue}
	for k, v := range tags {
		out[k] = labelValue(v)
	}
	return out
}

// tagSelector selects the objects hoist created that carry all of tags.
func tagSelector(tags map[string]string) string {
	return labels.SelectorFromSet(tagLabels(tags)).String()
}

// tagAnnotations returns the annotations that keep tags verbatim.
func tagAnnotations(tags map[string]string) map[string]string {
	b, _ := json.Marshal(tags) // a map of strings always marshals
	return map[string]string{tagsAnnotation: string(b)}
}

// tagsOf reads the ownership tags back from an object's annotations, or,
// for an object without them, from its labels.
func tagsOf(annotations, lbls map[string]string) map[string]string {
	var tags map[string]string
	if err := json.Unmarshal([]byte(annotations[tagsAnnotation]), &tags); err == nil && tags != nil {
		return tags
	}
	tags = maps.Clone(lbls)
	delete(tags, managedByLabel)
	return tags
}
