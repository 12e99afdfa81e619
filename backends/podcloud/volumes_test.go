package podcloud

import (
	"strings"
	"testing"

	"hoist/agents/api"
	"hoist/backends"
)

func TestVolumeName(t *testing.T) {
	tests := []struct{ name, id, want string }{
		{name: "Data Set_1", id: "v1", want: "hoist-data-set-1-" + backends.IDSuffix("v1")},
		{name: "", id: "v1", want: "hoist-" + backends.IDSuffix("v1")},
		{name: strings.Repeat("x", 80), id: "v2", want: "hoist-" + strings.Repeat("x", maxVolumeName-len("hoist--")-8) + "-" + backends.IDSuffix("v2")},
	}
	for _, tt := range tests {
		got := volumeName(tt.name, tt.id)
		if got != tt.want || len(got) > maxVolumeName || !volumeOf(got, tt.id) || volumeOf(got, tt.id+"x") {
			t.Errorf("volumeName(%q, %q) = %q, want %q, found by its id only", tt.name, tt.id, got, tt.want)
		}
	}
}

func TestNetworkRefusal(t *testing.T) {
	vol := api.NetworkVolume{Name: "data", Claim: "abc", Path: "/data"}
	ro := vol
	ro.ReadOnly = true
	dev := api.NetworkVolume{Name: "disk", DevicePath: "/dev/sdb", Path: "/data"}
	runpod := VolumeLimits{MaxPerPod: 1}
	tests := []struct {
		name string
		nvs  []api.NetworkVolume
		lim  VolumeLimits
		want string // in the refusal; "" for none
	}{
		{name: "no volumes, no provider volumes: accepted", lim: VolumeLimits{}},
		{name: "a provider without volumes refuses one", nvs: []api.NetworkVolume{vol}, want: "attaches no network volumes"},
		{name: "one claim within the limit is accepted", nvs: []api.NetworkVolume{vol}, lim: runpod},
		{name: "more than the provider mounts", nvs: []api.NetworkVolume{vol, vol}, lim: runpod, want: "at most 1"},
		{name: "a device is not the provider's volume", nvs: []api.NetworkVolume{dev}, lim: runpod, want: "not devices"},
		{name: "read-only where the provider cannot", nvs: []api.NetworkVolume{ro}, lim: runpod, want: "read-write only"},
		{name: "read-only where the provider can", nvs: []api.NetworkVolume{ro}, lim: VolumeLimits{MaxPerPod: 1, ReadOnly: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := refusal(api.TaskSpec{NetworkVolumes: tt.nvs}, tt.lim)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("refusal = %q, want %q", got, tt.want)
			}
		})
	}
}
