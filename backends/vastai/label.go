package vastai

import (
	"net/url"
	"strings"

	"hoist/backends"
	"hoist/backends/podcloud"
)

// A Vast.ai instance has one free-form string of the renter's, its label
// (vast.py's `label` command; dstack puts the instance name there), so the
// driver keeps the pod's name and tags in it as
//
//	<name>?<key>=<value>&<key>=<value>...
//
// the name and the tags query-escaped (net/url), the tags sorted by key,
// the ownership and task tags under one-letter keys to keep the label
// short, any other tag under its own key. For example:
//
//	hoist-3f9c?i=9b1e4a&n=inst-1&p=main&r=fleet%2Fgpu&t=3f9c
//
// The name is left out when it is the engine's default for the task
// ("hoist-" and the task tag), and read back as such. A label without "?"
// (an instance rented by hand) has a name and no tags.
var shortTags = map[string]string{
	backends.TagInstallation: "i",
	backends.TagProject:      "p",
	backends.TagResource:     "r",
	backends.TagInstance:     "n",
	podcloud.TagTask:         "t",
}

// longTags inverts shortTags.
var longTags = func() map[string]string {
	m := make(map[string]string, len(shortTags))
	for k, v := range shortTags {
		m[v] = k
	}
	return m
}()

// encodeLabel returns the label of a pod named name with tags.
func encodeLabel(name string, tags map[string]string) string {
	v := url.Values{}
	for k, val := range tags {
		if s, ok := shortTags[k]; ok {
			k = s
		}
		v.Set(k, val)
	}
	if len(v) == 0 {
		return url.QueryEscape(name)
	}
	if task := tags[podcloud.TagTask]; task != "" && name == defaultName(task) {
		name = ""
	}
	return url.QueryEscape(name) + "?" + v.Encode()
}

// decodeLabel returns the name and tags a label holds; a label that does
// not parse is all name.
func decodeLabel(label string) (name string, tags map[string]string) {
	rawName, query, ok := strings.Cut(label, "?")
	name, err := url.QueryUnescape(rawName)
	if err != nil {
		return label, nil
	}
	if !ok {
		return name, nil
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return label, nil
	}
	tags = make(map[string]string, len(v))
	for k, vals := range v {
		if l, ok := longTags[k]; ok {
			k = l
		}
		if len(vals) > 0 {
			tags[k] = vals[0]
		}
	}
	if name == "" && tags[podcloud.TagTask] != "" {
		name = defaultName(tags[podcloud.TagTask])
	}
	return name, tags
}

// defaultName is the engine's name of the pod of task.
func defaultName(task string) string { return "hoist-" + task }
