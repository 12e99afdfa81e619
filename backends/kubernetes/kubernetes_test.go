package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// openTestBackend opens the driver through its Factory against the test
// cluster, in a namespace of its own (deleted at the end), with extra
// options merged in; it returns the backend and its records.
func openTestBackend(t *testing.T, extra map[string]any) (*Backend, backends.Records) {
	t.Helper()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	ns := "hoist-k8s-driver-" + hex.EncodeToString(buf)
	opts := map[string]any{"kubeconfig": map[string]any{"filename": testenv.Kubernetes(t).Kubeconfig}, "namespace": ns}
	for k, v := range extra {
		opts[k] = v
	}
	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	recs := drivertest.Records(t)
	be, err := Factory(backends.Config{Name: "kubernetes", Type: "kubernetes", Options: raw}, drivertest.Deps(t, recs))
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*Backend)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.c.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete namespace %s: %v", ns, err)
		}
	})
	return b, recs
}

// TestConformance runs the conformance kit against the real cluster: the
// instances are reservations, a task of busybox runs a job through the pod
// shim and leaves no pod or secret, volumes are claims (a claim made with
// client-go stands for dstack's claim_name).
func TestConformance(t *testing.T) {
	b, _ := openTestBackend(t, nil)
	testenv.Kubernetes(t).LockNode(t) // the kit compares offers of the node
	conformance.Run(t, conformance.Options{
		Backend:   b,
		Timeout:   time.Minute,
		TaskImage: testImage,
		TaskLeftovers: func(t *testing.T, inst backends.Instance) []string {
			var left []string
			sel := metav1.ListOptions{LabelSelector: tasksSelector(inst.ID)}
			pods, err := b.c.client.CoreV1().Pods(b.c.namespace).List(t.Context(), sel)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				left = append(left, "pod/"+p.Name)
			}
			secrets, err := b.c.client.CoreV1().Secrets(b.c.namespace).List(t.Context(), sel)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets.Items {
				left = append(left, "secret/"+s.Name)
			}
			return left
		},
		ExternalVolume: func(t *testing.T, _ string, sizeGB float64) string {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "external-claim"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: quantityGiB(sizeGB)}},
				},
			}
			if _, err := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return pvc.Name
		},
	})
}

// TestOffers_freeCapacityOfTheRealNode: the node's offer is what it has
// allocatable less what its pods request; a pod bound to the node takes
// its memory request off the offer.
func TestOffers_freeCapacityOfTheRealNode(t *testing.T) {
	b, _ := openTestBackend(t, map[string]any{"price": map[string]any{"cpu": 0.5, "memory": 0.25}})
	testenv.Kubernetes(t).LockNode(t)
	ctx := t.Context()
	nodes, err := b.c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	n := nodes.Items[0]
	alloc := n.Status.Allocatable[corev1.ResourceMemory]
	allocGB := float64(alloc.Value()) / (1 << 30)

	all, err := b.Offers(ctx, offers.Query{InstanceTypes: []string{n.Name}})
	if err != nil || len(all) != 1 {
		t.Fatalf("Offers(node %s) = %+v, %v; want one offer", n.Name, all, err)
	}
	o := all[0]
	if o.Backend != "kubernetes" || o.Region == "" || o.CPUs < 1 || o.MemoryGB <= 0 || o.MemoryGB > allocGB {
		t.Errorf("offer %+v: want backend kubernetes, a region, ≥ 1 CPU, memory in (0, %.1f]", o, allocGB)
	}
	if want := float64(o.CPUs)*0.5 + o.MemoryGB*0.25; o.Price != want {
		t.Errorf("price = %v, want %v", o.Price, want)
	}

	// A pod bound to the node (no scheduler involved) that requests 2 GiB.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hog"},
		Spec: corev1.PodSpec{
			NodeName: n.Name, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "hog", Image: "hoist-e2e/busybox:latest", ImagePullPolicy: corev1.PullNever,
				Command:   []string{"sleep", "600"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}},
			}},
		},
	}
	if _, err := b.c.client.CoreV1().Pods(b.c.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = b.c.client.CoreV1().Pods(b.c.namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	after, err := b.Offers(ctx, offers.Query{InstanceTypes: []string{n.Name}})
	if err != nil || len(after) != 1 {
		t.Fatalf("Offers after the pod = %+v, %v", after, err)
	}
	if after[0].MemoryGB > allocGB-2+0.05 {
		t.Errorf("memory offered next to a pod requesting 2 GiB = %v GB, want at most %.1f (allocatable %.1f)", after[0].MemoryGB, allocGB-2, allocGB)
	}

	// A slice: the query's minimums.
	sl, err := b.Offers(ctx, offers.Query{CPU: offers.AtLeast(1), Memory: offers.AtLeast(1)})
	if err != nil || len(sl) != 1 || sl[0].CPUs != 1 || sl[0].MemoryGB != 1 || sl[0].Price != 0.75 {
		t.Errorf("Offers(cpu 1.., memory 1GB..) = %+v, %v; want one 1-CPU 1-GB slice at $0.75", sl, err)
	}
	if none, err := b.Offers(ctx, offers.Query{Memory: offers.AtLeast(allocGB + 1)}); err != nil || len(none) != 0 {
		t.Errorf("Offers(more memory than the node) = %+v, %v; want none", none, err)
	}
}

// TestFactory_createsItsNamespace: a namespace that does not exist is
// created (labelled as hoist's) when the backend starts.
func TestFactory_createsItsNamespace(t *testing.T) {
	b, _ := openTestBackend(t, nil)
	ns, err := b.c.client.CoreV1().Namespaces().Get(t.Context(), b.c.namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace %s: %v", b.c.namespace, err)
	}
	if ns.Labels[managedByLabel] != managedByValue {
		t.Errorf("namespace labels %v lack %s=%s", ns.Labels, managedByLabel, managedByValue)
	}
}

// TestVolumes_claimsFromTheSpec: a volume's claim carries the storage
// class, access modes and size asked, and hoist's labels; attaching names
// the claim; a registered claim that does not exist needs the user.
func TestVolumes_claimsFromTheSpec(t *testing.T) {
	b, recs := openTestBackend(t, nil)
	ctx := t.Context()
	tags := map[string]string{backends.TagInstallation: "driver-test", backends.TagResource: "volume/data"}
	spec := backends.VolumeSpec{ID: "vol-spec-1", Name: "Data", SizeGB: 2, StorageClass: "hoist-test-none", AccessModes: []string{"ReadWriteMany"}, Tags: tags}
	v, err := b.CreateVolume(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.DeleteVolume(context.Background(), spec.ID) })
	pvc, err := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace).Get(ctx, v.ProviderID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "hoist-test-none" ||
		len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany || size.String() != "2Gi" {
		t.Errorf("claim spec = %+v, want storage class hoist-test-none, ReadWriteMany, 2Gi", pvc.Spec)
	}
	if pvc.Labels[backends.TagVolume] != spec.ID || pvc.Labels[backends.TagInstallation] != "driver-test" ||
		pvc.Labels[backends.TagResource] != labelValue("volume/data") || pvc.Labels[managedByLabel] != managedByValue {
		t.Errorf("claim labels = %v", pvc.Labels)
	}
	if got := tagsOf(pvc.Annotations, pvc.Labels); got[backends.TagResource] != "volume/data" {
		t.Errorf("tags read back = %v", got)
	}

	for _, bad := range []backends.VolumeSpec{
		{ID: "vol-bad-1", Name: "x", Tags: tags},
		{ID: "vol-bad-2", Name: "x", SizeGB: 1, AccessModes: []string{"ReadWriteSometimes"}, Tags: tags},
	} {
		if _, err := b.CreateVolume(ctx, bad); !backends.IsStalled(err) {
			t.Errorf("CreateVolume(%+v) = %v, want a stalled error", bad, err)
		}
	}
	if _, err := b.RegisterVolume(ctx, backends.VolumeSpec{ID: "vol-ext", Name: "x", ExternalID: "no-such-claim", Tags: tags}); !backends.IsStalled(err) {
		t.Errorf("RegisterVolume(no such claim) = %v, want a stalled error", err)
	}

	// Attach to a reserved instance: the claim, no device.
	inst, err := b.Create(ctx, backends.InstanceSpec{ID: "inst-vol-1", Offer: offers.Offer{CPUs: 1, MemoryGB: 1}, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = recs.DeleteBackendRecord(context.Background(), b.name, inst.ID) })
	att, err := b.AttachVolume(ctx, spec.ID, inst.ID)
	if err != nil || att.Claim != v.ProviderID || att.DevicePath != "" {
		t.Errorf("AttachVolume = %+v, %v; want claim %s", att, err, v.ProviderID)
	}
	if _, err := b.AttachVolume(ctx, spec.ID, "no-such-instance"); err == nil {
		t.Error("AttachVolume to an unknown instance succeeded")
	}
}

// TestList_podsWithoutARecordAreLeaks: a pod labelled for an instance
// hoist has no record of (a lost Create, a record deleted) is listed and
// described as a terminating instance, and Terminate deletes it, waiting
// (KindWait) while the pod shuts down.
func TestList_podsWithoutARecordAreLeaks(t *testing.T) {
	b, _ := openTestBackend(t, nil)
	ctx := t.Context()
	tags := map[string]string{backends.TagInstallation: "driver-leak", backends.TagResource: "fleet/k8s", backends.TagInstance: "leaked-1"}
	grace := int64(3) // sleep ignores SIGTERM: the pod takes its grace to go
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "leaked", Labels: tagLabels(tags), Annotations: tagAnnotations(tags)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: "hoist-e2e/busybox:latest", ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "600"}}},
		},
	}
	if _, err := b.c.client.CoreV1().Pods(b.c.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := b.List(ctx, map[string]string{backends.TagInstallation: "driver-leak"})
	if err != nil || len(got) != 1 || got[0].ID != "leaked-1" || got[0].Status != backends.StatusTerminating || got[0].Tags[backends.TagResource] != "fleet/k8s" {
		t.Fatalf("List = %+v, %v; want the leaked instance, terminating, with its tags", got, err)
	}
	if other, err := b.List(ctx, map[string]string{backends.TagInstallation: "someone-else"}); err != nil || len(other) != 0 {
		t.Errorf("List(another installation) = %+v, %v; want none", other, err)
	}
	if d, err := b.Describe(ctx, "leaked-1"); err != nil || d.Status != backends.StatusTerminating {
		t.Errorf("Describe(leaked) = %+v, %v; want terminating", d, err)
	}
	if _, err := b.c.client.CoreV1().Pods(b.c.namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Terminate(ctx, "leaked-1"); !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
		t.Errorf("first Terminate(leaked) = %v (kind %s), want ErrNotYetTerminated of kind wait while the pod shuts down", err, backends.KindOf(err))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := b.Terminate(ctx, "leaked-1")
		if err == nil {
			break
		}
		if backends.KindOf(err) == backends.KindStalled || time.Now().After(deadline) {
			t.Fatalf("Terminate(leaked): %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got, err := b.List(ctx, map[string]string{backends.TagInstallation: "driver-leak"}); err != nil || len(got) != 0 {
		t.Errorf("List after Terminate = %+v, %v; want none", got, err)
	}
}

// TestOffers_fakeGPUs: a node advertising two nvidia.com/gpu of a product
// (the status patched as a device plugin would) is offered with GPUs named
// from its label, sliced to the GPUs asked; three GPUs are no offer.
func TestOffers_fakeGPUs(t *testing.T) {
	b, _ := openTestBackend(t, map[string]any{"price": map[string]any{"gpu": 2}})
	testenv.Kubernetes(t).FakeGPU(t, 2, "NVIDIA-A100-SXM4-40GB")
	ctx := t.Context()
	// Pods of another test's fake GPUs may still be shutting down.
	deadline := time.Now().Add(time.Minute)
	for {
		pods, err := b.activePods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var holding []string
		for i := range pods {
			if q := podRequests(&pods[i])[resourceNVIDIAGPU]; !q.IsZero() {
				holding = append(holding, pods[i].Namespace+"/"+pods[i].Name)
			}
		}
		if len(holding) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods still hold GPUs after a minute: %v", holding)
		}
		time.Sleep(200 * time.Millisecond)
	}
	tests := []struct {
		name  string
		q     offers.Query
		gpus  int // 0: no offer
		price float64
	}{
		{"the whole node has both GPUs", offers.Query{}, 2, 4},
		{"one GPU is a slice of one", offers.Query{GPUCount: offers.AtLeast(1)}, 1, 2},
		{"by name and memory", offers.Query{GPUNames: []string{"a100"}, GPUMemory: offers.AtLeast(40), GPUCount: offers.Exactly(2)}, 2, 4},
		{"three GPUs are more than the node has", offers.Query{GPUCount: offers.AtLeast(3)}, 0, 0},
		{"another model is not there", offers.Query{GPUNames: []string{"H100"}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.Offers(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if tt.gpus == 0 {
				if len(got) != 0 {
					t.Errorf("Offers = %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("Offers = %+v, want one", got)
			}
			o := got[0]
			if o.GPUVendor != offers.VendorNVIDIA || o.GPUName != "A100" || o.GPUMemoryGB != 40 || o.GPUCount != tt.gpus || o.Price != tt.price {
				t.Errorf("offer %+v: want %d nvidia A100 40GB at $%v", o, tt.gpus, tt.price)
			}
		})
	}
}
