package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/e2e/testenv"
)

// pod is a busybox pod running args once, in namespace ns.
func pod(ns, name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           testenv.BusyboxImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         args,
			}},
		},
	}
}

// waitPod waits until done(pod) holds and returns the pod.
func waitPod(t *testing.T, c *testenv.KubeCluster, ns, name string, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && done(p) {
			return p
		}
		select {
		case <-ctx.Done():
			if err != nil {
				t.Fatalf("pod %s/%s: not %s: %v", ns, name, what, err)
			}
			t.Fatalf("pod %s/%s: not %s: status %+v", ns, name, what, p.Status)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runPod creates the pod, waits until it succeeds and returns its log.
func runPod(t *testing.T, c *testenv.KubeCluster, p *corev1.Pod) string {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, p.Namespace, p.Name, "Succeeded", func(p *corev1.Pod) bool {
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod %s failed: %+v", p.Name, p.Status)
		}
		return p.Status.Phase == corev1.PodSucceeded
	})
	b, err := c.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestKubernetes_podRunsAnImportedImage(t *testing.T) {
	c := testenv.Kubernetes(t)
	c.ImportImage(t, testenv.Docker(t))
	ns := c.Namespace(t, "hoist-testenv")
	start := time.Now()
	if got := runPod(t, c, pod(ns, "hello", "echo", "hello")); got != "hello\n" {
		t.Errorf("log = %q, want %q", got, "hello\n")
	}
	t.Logf("pod created → Succeeded → log read in %s", time.Since(start).Round(time.Millisecond))
}

func TestKubernetes_fakeGPUsScheduleUpToTheirCount(t *testing.T) {
	c := testenv.Kubernetes(t)
	c.ImportImage(t, testenv.Docker(t))
	ns := c.Namespace(t, "hoist-testenv")
	gpuPod := func(name string, n int64) *corev1.Pod {
		p := pod(ns, name, "echo", "ok")
		q := *resource.NewQuantity(n, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{testenv.GPUResource: q}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: testenv.GPUProductLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-A100-SXM4-40GB"},
				}},
			}}},
		}}
		return p
	}
	t.Run("advertised", func(t *testing.T) {
		c.FakeGPU(t, 2, "NVIDIA-A100-SXM4-40GB")
		pods := c.Client.CoreV1().Pods(ns)
		t.Cleanup(func() {
			_ = pods.DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		})
		if _, err := pods.Create(t.Context(), gpuPod("three", 3), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := runPod(t, c, gpuPod("one", 1)); got != "ok\n" {
			t.Errorf("gpu: 1 pod log = %q, want %q", got, "ok\n")
		}
		p := waitPod(t, c, ns, "three", "unschedulable", func(p *corev1.Pod) bool {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
					return true
				}
			}
			return false
		})
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && !strings.Contains(cond.Message, "Insufficient nvidia.com/gpu") {
				t.Errorf("gpu: 3 pod: PodScheduled message %q, want Insufficient nvidia.com/gpu", cond.Message)
			}
		}
	})
	t.Run("removed", func(t *testing.T) {
		c.LockNode(t) // no other test's fake GPUs either
		n, err := c.Client.CoreV1().Nodes().Get(t.Context(), c.Node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q, ok := n.Status.Capacity[testenv.GPUResource]; ok {
			t.Errorf("after the test the node's capacity still has %s: %s", testenv.GPUResource, q.String())
		}
		if q, ok := n.Status.Allocatable[testenv.GPUResource]; ok {
			t.Errorf("after the test the node's allocatable still has %s: %s", testenv.GPUResource, q.String())
		}
		if v, ok := n.Labels[testenv.GPUProductLabel]; ok {
			t.Errorf("after the test the node is still labelled %s=%s", testenv.GPUProductLabel, v)
		}
	})
}

func TestKubernetes_hostPathVolumesBindClaims(t *testing.T) {
	c := testenv.Kubernetes(t)
	c.ImportImage(t, testenv.Docker(t))
	var class string
	t.Run("claims", func(t *testing.T) {
		ns := c.Namespace(t, "hoist-testenv")
		class = c.HostPathVolumes(t, 1, "1Gi")
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &class,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse("512Mi"),
				}},
			},
		}
		claims := c.Client.CoreV1().PersistentVolumeClaims(ns)
		if _, err := claims.Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		mount := func(p *corev1.Pod) *corev1.Pod {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			return p
		}
		runPod(t, c, mount(pod(ns, "writer", "sh", "-c", "echo kept > /data/f")))
		if got := runPod(t, c, mount(pod(ns, "reader", "cat", "/data/f"))); got != "kept\n" {
			t.Errorf("the second pod read %q, want %q", got, "kept\n")
		}
		got, err := claims.Get(t.Context(), "data", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.ClaimBound || got.Spec.VolumeName != class+"-0" {
			t.Errorf("claim: phase %s, volume %q; want Bound to %s-0", got.Status.Phase, got.Spec.VolumeName, class)
		}
		// The pods go first, so that the claim and volume can go at once.
		pods := c.Client.CoreV1().Pods(ns)
		if err := pods.DeleteCollection(t.Context(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: testenv.TestLabel + "=" + class})
		if err == nil && len(pvs.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the test's volumes are not deleted: %v %v", err, pvs)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := c.Client.StorageV1().StorageClasses().Get(t.Context(), class, metav1.GetOptions{}); err == nil {
		t.Errorf("storage class %s still exists", class)
	}
}

// TestKubernetes_podsReachEachOtherAtTheirIPs: a pod connects to a port
// another listens on at that pod's IP, across the cluster's bridge (the
// pod network the nodes of a multi-node job talk over).
func TestKubernetes_podsReachEachOtherAtTheirIPs(t *testing.T) {
	c := testenv.Kubernetes(t)
	c.ImportImage(t, testenv.Docker(t))
	ns := c.Namespace(t, "hoist-testenv")
	// busybox nc shuts its sending side when its stdin ends, and may then
	// exit before it reads what the talker sent; a FIFO it holds open
	// itself keeps the pod's stdin from ending.
	server := pod(ns, "listener", "sh", "-c", "mkfifo /tmp/nc-in; exec 3<>/tmp/nc-in; nc -l -p 7200 <&3")
	if _, err := c.Client.CoreV1().Pods(ns).Create(t.Context(), server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip := waitPod(t, c, ns, server.Name, "running with an IP", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
	}).Status.PodIP
	client := pod(ns, "talker", "sh", "-c",
		`for i in $(seq 100); do echo hello | nc "$0" 7200 && exit 0; sleep 0.1; done; exit 1`, ip)
	runPod(t, c, client)
	waitPod(t, c, ns, server.Name, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	b, err := c.Client.CoreV1().Pods(ns).GetLogs(server.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil || string(b) != "hello\n" {
		t.Errorf("listener at %s logged %q, %v; want the talker's line", ip, b, err)
	}
}
