package kubernetes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/backends/offers"
)

// node returns a ready node with allocatable cpu, memory, ephemeral
// storage and extra resources, edited by edit.
func node(cpu, mem, disk string, extra corev1.ResourceList, edit func(*corev1.Node)) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(cpu),
		corev1.ResourceMemory:           resource.MustParse(mem),
		corev1.ResourceEphemeralStorage: resource.MustParse(disk),
	}
	for k, v := range extra {
		alloc[k] = v
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{}},
		Status: corev1.NodeStatus{
			Allocatable: alloc,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:    corev1.NodeSystemInfo{Architecture: "amd64"},
		},
	}
	if edit != nil {
		edit(n)
	}
	return n
}

func requests(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
	}}
}

func TestNodeOffer(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	gpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{resourceNVIDIAGPU: resource.MustParse(n)}
	}
	tests := []struct {
		name string
		node *corev1.Node
		pods []corev1.Pod
		want offers.Offer
		ok   bool
	}{
		{
			name: "an empty node offers all it has allocatable",
			node: node("8", "32Gi", "100Gi", nil, nil),
			want: offers.Offer{Instance: "node-1", CPUs: 8, CPUArch: offers.ArchX86, MemoryGB: 32, DiskGB: 100, Availability: offers.AvailabilityAvailable},
			ok:   true,
		},
		{
			name: "the requests of running pods are taken off, partial CPUs rounded down",
			node: node("8", "32Gi", "100Gi", nil, nil),
			pods: []corev1.Pod{
				{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: requests("1500m", "4Gi")}, {Resources: requests("1", "2Gi")}}}},
			},
			want: offers.Offer{Instance: "node-1", CPUs: 5, CPUArch: offers.ArchX86, MemoryGB: 26, DiskGB: 100, Availability: offers.AvailabilityAvailable},
			ok:   true,
		},
		{
			name: "an init container counts when it asks more than the containers, a sidecar adds up, overhead too",
			node: node("8", "32Gi", "100Gi", nil, nil),
			pods: []corev1.Pod{{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Resources: requests("3", "1Gi")}, {RestartPolicy: &always, Resources: requests("1", "1Gi")}},
				Containers:     []corev1.Container{{Resources: requests("1", "2Gi")}},
				Overhead:       corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}},
			// cpu: max(1+1, 3) = 3; memory: max(2+1, 1) + 1 = 4.
			want: offers.Offer{Instance: "node-1", CPUs: 5, CPUArch: offers.ArchX86, MemoryGB: 28, DiskGB: 100, Availability: offers.AvailabilityAvailable},
			ok:   true,
		},
		{
			name: "GPUs are named from the product label, memory from the memory label",
			node: node("16", "64Gi", "200Gi", gpus("2"), func(n *corev1.Node) {
				n.Labels[labelNVIDIAProduct] = "NVIDIA-A100-SXM4-40GB"
				n.Labels[labelNVIDIAMemory] = "40960"
			}),
			want: offers.Offer{Instance: "node-1", CPUs: 16, CPUArch: offers.ArchX86, MemoryGB: 64, DiskGB: 200, Availability: offers.AvailabilityAvailable,
				GPUVendor: offers.VendorNVIDIA, GPUName: "A100", GPUCount: 2, GPUMemoryGB: 40},
			ok: true,
		},
		{
			name: "GPUs a pod holds are not free; a node tainted for GPUs is offered",
			node: node("16", "64Gi", "200Gi", gpus("2"), func(n *corev1.Node) {
				n.Labels[labelNVIDIAProduct] = "Tesla-T4"
				n.Spec.Taints = []corev1.Taint{{Key: string(resourceNVIDIAGPU), Effect: corev1.TaintEffectNoSchedule}}
			}),
			pods: []corev1.Pod{{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{resourceNVIDIAGPU: resource.MustParse("1")},
			}}}}}},
			want: offers.Offer{Instance: "node-1", CPUs: 16, CPUArch: offers.ArchX86, MemoryGB: 64, DiskGB: 200, Availability: offers.AvailabilityAvailable,
				GPUVendor: offers.VendorNVIDIA, GPUName: "T4", GPUCount: 1, GPUMemoryGB: 16},
			ok: true,
		},
		{
			name: "GPUs without a model label are not offered",
			node: node("4", "16Gi", "50Gi", gpus("1"), nil),
			want: offers.Offer{Instance: "node-1", CPUs: 4, CPUArch: offers.ArchX86, MemoryGB: 16, DiskGB: 50, Availability: offers.AvailabilityAvailable},
			ok:   true,
		},
		{
			name: "an AMD GPU is named from the node labeller's product name",
			node: node("4", "16Gi", "50Gi", corev1.ResourceList{resourceAMDGPU: resource.MustParse("8")}, func(n *corev1.Node) {
				n.Labels[labelAMDProduct] = "AMD_Instinct_MI300X_OAM"
				n.Status.NodeInfo.Architecture = "arm64"
			}),
			want: offers.Offer{Instance: "node-1", CPUs: 4, CPUArch: offers.ArchARM, MemoryGB: 16, DiskGB: 50, Availability: offers.AvailabilityAvailable,
				GPUVendor: offers.VendorAMD, GPUName: "MI300X", GPUCount: 8, GPUMemoryGB: 192},
			ok: true,
		},
		{
			name: "a cordoned node is not offered",
			node: node("4", "16Gi", "50Gi", nil, func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		},
		{
			name: "a node that is not ready is not offered",
			node: node("4", "16Gi", "50Gi", nil, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
		},
		{
			name: "a node with another hard taint is not offered",
			node: node("4", "16Gi", "50Gi", nil, func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
			}),
		},
		{
			name: "a soft taint does not matter",
			node: node("4", "16Gi", "50Gi", nil, func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
			}),
			want: offers.Offer{Instance: "node-1", CPUs: 4, CPUArch: offers.ArchX86, MemoryGB: 16, DiskGB: 50, Availability: offers.AvailabilityAvailable},
			ok:   true,
		},
		{
			name: "a node without a whole CPU free is not offered",
			node: node("2", "16Gi", "50Gi", nil, nil),
			pods: []corev1.Pod{{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: requests("1100m", "1Gi")}}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := nodeOffer(tt.node, tt.pods)
			if ok != tt.ok {
				t.Fatalf("ok = %t, want %t (offer %+v)", ok, tt.ok, got)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("offer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSlice(t *testing.T) {
	whole := offers.Offer{Backend: "k8s", Instance: "node-1", Region: "ctx", CPUs: 16, CPUArch: offers.ArchX86, MemoryGB: 64, DiskGB: 200,
		GPUVendor: offers.VendorNVIDIA, GPUName: "A100", GPUCount: 2, GPUMemoryGB: 40, Availability: offers.AvailabilityAvailable}
	cpuOnly := whole
	cpuOnly.GPUVendor, cpuOnly.GPUName, cpuOnly.GPUCount, cpuOnly.GPUMemoryGB = "", "", 0, 0
	with := func(cpus int, mem, disk float64, gpus int) offers.Offer {
		o := whole
		o.CPUs, o.MemoryGB, o.DiskGB, o.GPUCount = cpus, mem, disk, gpus
		if gpus == 0 {
			o.GPUVendor, o.GPUName, o.GPUMemoryGB = "", "", 0
		}
		return o
	}
	tests := []struct {
		name string
		q    offers.Query
		want offers.Offer
		ok   bool
	}{
		{"no minimum takes the whole free node", offers.Query{}, whole, true},
		{"the minimums are the slice", offers.Query{CPU: offers.AtLeast(2), Memory: offers.AtLeast(8), Disk: offers.AtLeast(50), GPUCount: offers.AtLeast(1)}, with(2, 8, 50, 1), true},
		{"a fractional CPU minimum rounds up", offers.Query{CPU: offers.AtLeast(1.5)}, with(2, 64, 200, 2), true},
		{"gpu 0.. is a CPU-only slice", offers.Query{GPUCount: offers.AtLeast(0)}, cpuOnly, true},
		{"a maximum below what is free caps the slice", offers.Query{CPU: offers.AtMost(4), Memory: offers.AtMost(16)}, with(4, 16, 200, 2), true},
		{"more CPUs than free is no slice", offers.Query{CPU: offers.AtLeast(17)}, offers.Offer{}, false},
		{"more memory than free is no slice", offers.Query{Memory: offers.AtLeast(65)}, offers.Offer{}, false},
		{"more GPUs than free is no slice", offers.Query{GPUCount: offers.AtLeast(3)}, offers.Offer{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := slice(whole, tt.q)
			if ok != tt.ok {
				t.Fatalf("ok = %t, want %t (slice %+v)", ok, tt.ok, got)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("slice (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEstimatePrice_pricesTheMinimums(t *testing.T) {
	b := &Backend{price: PriceOptions{CPU: 0.01, Memory: 0.001, GPU: 1}}
	tests := []struct {
		name string
		q    offers.Query
		want float64
	}{
		{"nothing asked is one vCPU", offers.Query{}, 0.01},
		{"cpu, memory and GPUs", offers.Query{CPU: offers.AtLeast(4), Memory: offers.AtLeast(16), GPUCount: offers.Between(2, 8)}, 4*0.01 + 16*0.001 + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := b.EstimatePrice(tt.q); got != tt.want {
				t.Errorf("EstimatePrice = %v, want %v", got, tt.want)
			}
		})
	}
}
