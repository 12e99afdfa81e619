package kubernetes

import (
	"context"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/backends/offers"
)

// GPUs on nodes: the extended resources of NVIDIA's and AMD's device
// plugins, and the labels naming the model (NVIDIA's GPU feature
// discovery, https://github.com/NVIDIA/k8s-device-plugin; AMD's node
// labeller, https://github.com/ROCm/k8s-device-plugin).
const (
	resourceNVIDIAGPU corev1.ResourceName = "nvidia.com/gpu"
	resourceAMDGPU    corev1.ResourceName = "amd.com/gpu"
	// labelNVIDIAProduct is e.g. NVIDIA-A100-SXM4-40GB.
	labelNVIDIAProduct = "nvidia.com/gpu.product"
	// labelNVIDIAMemory is the memory of one GPU in MiB.
	labelNVIDIAMemory = "nvidia.com/gpu.memory"
	// labelAMDProduct is e.g. AMD_Instinct_MI300X_OAM.
	labelAMDProduct = "amd.com/gpu.product-name"
)

// Offers returns, for every node that can take pods, the slice of its free
// capacity q asks for (what dstack's offer modifier does): the query's
// minimums where it sets them, else everything free; free is the node's
// allocatable CPU, memory, ephemeral storage and GPUs minus the requests of
// its pods that have not finished (in every namespace). Nodes that are
// cordoned, not ready, or tainted NoSchedule/NoExecute other than for GPUs
// are left out (dstack: core/backends/kubernetes/compute.py). The price is
// the slice's at the configured rates.
func (b *Backend) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	nodes, err := b.c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, b.apiError("list nodes", err)
	}
	pods, err := b.activePods(ctx)
	if err != nil {
		return nil, err
	}
	byNode := map[string][]corev1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	var out []offers.Offer
	for i := range nodes.Items {
		n := &nodes.Items[i]
		whole, ok := nodeOffer(n, byNode[n.Name])
		if !ok {
			continue
		}
		whole.Backend, whole.Region = b.name, b.c.region
		o, ok := slice(whole, q)
		if !ok {
			continue
		}
		o.Price = b.price.of(o.CPUs, o.MemoryGB, o.GPUCount)
		out = append(out, o)
	}
	return offers.Filter(out, q), nil
}

// activePods returns the pods that have not finished, in every namespace;
// with credentials limited to the namespace, the namespace's only.
func (b *Backend) activePods(ctx context.Context) ([]corev1.Pod, error) {
	opts := metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"}
	list, err := b.c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	if apierrors.IsForbidden(err) {
		b.log.Debug("pods_not_listable_cluster_wide", "namespace", b.c.namespace, "error", err)
		list, err = b.c.client.CoreV1().Pods(b.c.namespace).List(ctx, opts)
	}
	if err != nil {
		return nil, b.apiError("list pods", err)
	}
	return list.Items, nil
}

// schedulable reports whether pods may land on n: not cordoned, ready,
// and without a hard taint other than a GPU resource's (dstack tolerates
// those on GPU pods).
func schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if t.Key != string(resourceNVIDIAGPU) && t.Key != string(resourceAMDGPU) {
			return false
		}
	}
	return true
}

// nodeOffer describes what node n has free next to pods (its pods that
// have not finished): the whole free capacity as an available offer
// named after the node. ok is false when pods cannot land on n or it has
// no whole CPU or no memory free.
func nodeOffer(n *corev1.Node, pods []corev1.Pod) (offers.Offer, bool) {
	if !schedulable(n) {
		return offers.Offer{}, false
	}
	used := corev1.ResourceList{}
	for i := range pods {
		addList(used, podRequests(&pods[i]))
	}
	free := func(name corev1.ResourceName) int64 {
		a := n.Status.Allocatable[name]
		u := used[name]
		if name == corev1.ResourceCPU {
			return max(0, a.MilliValue()-u.MilliValue())
		}
		return max(0, a.Value()-u.Value())
	}
	o := offers.Offer{
		Instance:     n.Name,
		CPUs:         int(free(corev1.ResourceCPU) / 1000),
		CPUArch:      offers.ArchX86,
		MemoryGB:     gib(free(corev1.ResourceMemory)),
		DiskGB:       gib(free(corev1.ResourceEphemeralStorage)),
		Availability: offers.AvailabilityAvailable,
	}
	if a := n.Status.NodeInfo.Architecture; a == "arm64" || a == "arm" {
		o.CPUArch = offers.ArchARM
	}
	if o.CPUs < 1 || o.MemoryGB <= 0 {
		return offers.Offer{}, false
	}
	if vendor, name, memGB, count := nodeGPUs(n, free); count > 0 {
		o.GPUVendor, o.GPUName, o.GPUMemoryGB, o.GPUCount = vendor, name, memGB, count
		offers.NormalizeOffer(&o)
	}
	return o, true
}

// nodeGPUs returns the vendor, model, memory per GPU (GB, 0 when the
// labels do not say) and free count of n's GPUs. A node whose GPUs carry
// no model label has none to offer (a query could not name them).
func nodeGPUs(n *corev1.Node, free func(corev1.ResourceName) int64) (vendor, name string, memGB float64, count int) {
	if c := free(resourceNVIDIAGPU); c > 0 {
		if p := n.Labels[labelNVIDIAProduct]; p != "" {
			if mib, err := strconv.ParseFloat(n.Labels[labelNVIDIAMemory], 64); err == nil && mib > 0 {
				memGB = math.Round(mib/1024*10) / 10
			}
			return offers.VendorNVIDIA, strings.ReplaceAll(p, "RTX-", "RTX "), memGB, int(c)
		}
	}
	if c := free(resourceAMDGPU); c > 0 {
		if p := n.Labels[labelAMDProduct]; p != "" {
			return offers.VendorAMD, strings.ReplaceAll(p, "_", " "), 0, int(c)
		}
	}
	return "", "", 0, 0
}

// podRequests returns what a pod takes from its node (the scheduler's
// rule, https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers):
// per resource, the larger of the sum of its containers' requests (with
// sidecars, init containers that keep running) and the largest request of
// an init container, plus the pod's overhead.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		addList(sum, c.Resources.Requests)
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addList(sum, c.Resources.Requests)
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			continue
		}
		for name, q := range c.Resources.Requests {
			if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
				sum[name] = q.DeepCopy()
			}
		}
	}
	addList(sum, p.Spec.Overhead)
	return sum
}

// addList adds every quantity of add to dst.
func addList(dst, add corev1.ResourceList) {
	for name, q := range add {
		cur := dst[name]
		cur.Add(q)
		dst[name] = cur
	}
}

// gib returns n bytes in GiB, rounded down to a tenth.
func gib(n int64) float64 { return math.Floor(float64(n)/(1<<30)*10) / 10 }

// slice cuts the whole free capacity of a node to what q asks: each of
// CPUs, memory, disk and GPUs is the query's minimum when it sets one,
// else the range's maximum when smaller than what is free, else all that
// is free. ok is false when the slice does not fit.
func slice(whole offers.Offer, q offers.Query) (offers.Offer, bool) {
	o := whole
	pick := func(r offers.Range, have float64) float64 {
		switch {
		case r.HasMin && r.Min > 0:
			return r.Min
		case r.HasMin:
			return 0
		case r.HasMax && r.Max < have:
			return r.Max
		}
		return have
	}
	cpus := math.Ceil(pick(q.CPU, float64(whole.CPUs)))
	o.CPUs = max(1, int(cpus))
	if m := pick(q.Memory, whole.MemoryGB); m > 0 {
		o.MemoryGB = m
	}
	if whole.DiskGB > 0 {
		if d := pick(q.Disk, whole.DiskGB); d > 0 {
			o.DiskGB = d
		}
	}
	o.GPUCount = int(math.Ceil(pick(q.GPUCount, float64(whole.GPUCount))))
	if o.GPUCount == 0 {
		o.GPUVendor, o.GPUName, o.GPUMemoryGB = "", "", 0
	}
	const eps = 1e-9
	if o.CPUs > whole.CPUs || o.MemoryGB > whole.MemoryGB+eps || o.DiskGB > whole.DiskGB+eps || o.GPUCount > whole.GPUCount {
		return offers.Offer{}, false
	}
	return o, true
}

// quantityGiB formats gb GiB as a Kubernetes quantity ("1Gi", "1536Mi").
func quantityGiB(gb float64) resource.Quantity {
	return *resource.NewQuantity(int64(math.Round(gb*(1<<30))), resource.BinarySI)
}

// EstimatePrice prices what q asks at the configured rates, without asking
// the cluster: its minimum vCPUs (at least one), memory and GPUs. Plans
// use it for their cost estimates.
func (b *Backend) EstimatePrice(q offers.Query) float64 {
	lo := func(r offers.Range) float64 {
		if r.HasMin {
			return r.Min
		}
		return 0
	}
	return b.price.of(max(1, int(math.Ceil(lo(q.CPU)))), lo(q.Memory), int(math.Ceil(lo(q.GPUCount))))
}
