package kubernetes

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
)

// TestDescribe_internalIPIsTheTaskPodsIP: on the real cluster an instance
// has no internal IP until a task's pod has one; then the task
// (TaskInfo.InternalIP), Describe and List report the pod's IP, on the pod
// network even for a task asking for host networking (a multi-node job's);
// once the task has ended the instance has none again.
func TestDescribe_internalIPIsTheTaskPodsIP(t *testing.T) {
	b, _ := openTestBackend(t, nil)
	testenv.Kubernetes(t).LockNode(t) // the pod takes a CPU of the node
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tags := map[string]string{backends.TagInstallation: "driver-ip", backends.TagResource: "fleet/k8s", backends.TagInstance: "ip-1"}
	inst, err := b.Create(ctx, backends.InstanceSpec{ID: "ip-1", Offer: offers.Offer{CPUs: 1, MemoryGB: 0.25}, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for ctx.Err() == nil && b.Terminate(ctx, inst.ID) != nil {
			time.Sleep(200 * time.Millisecond)
		}
	})
	if d, err := b.Describe(ctx, inst.ID); err != nil || inst.InternalIP != "" || d.InternalIP != "" {
		t.Fatalf("Create = %q, Describe = %q, %v; want no internal IP before a pod exists", inst.InternalIP, d.InternalIP, err)
	}
	conn, err := b.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: "ip-task", Image: testImage, NetworkMode: api.NetworkHost}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "ip-task", api.TaskRunning, time.Minute)
	pods, err := b.c.client.CoreV1().Pods(b.c.namespace).List(ctx, metav1.ListOptions{LabelSelector: taskSelector(inst.ID, "ip-task")})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of the task: %d, %v", len(pods.Items), err)
	}
	pod := pods.Items[0]
	ip := pod.Status.PodIP
	if ip == "" || pod.Spec.HostNetwork {
		t.Fatalf("pod IP %q, host network %v; want an IP of the pod network", ip, pod.Spec.HostNetwork)
	}
	if info.InternalIP != ip {
		t.Errorf("task's InternalIP = %q, want the pod's IP %s", info.InternalIP, ip)
	}
	if d, err := b.Describe(ctx, inst.ID); err != nil || d.InternalIP != ip {
		t.Errorf("Describe: InternalIP %q, %v; want the pod's IP %s", d.InternalIP, err, ip)
	}
	if l, err := b.List(ctx, map[string]string{backends.TagInstallation: "driver-ip"}); err != nil || len(l) != 1 || l[0].InternalIP != ip {
		t.Errorf("List = %+v, %v; want the instance with the pod's IP %s", l, err, ip)
	}

	if _, err := sc.TerminateTask(ctx, "ip-task", api.ReasonTerminatedByServer, "test over", 0); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Describe(ctx, inst.ID); err != nil || d.InternalIP != "" {
		t.Errorf("Describe after the task ended: InternalIP %q, %v; want none", d.InternalIP, err)
	}
	if err := sc.RemoveTask(ctx, "ip-task"); err != nil {
		t.Fatal(err)
	}
}
