package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeconfigEnv is the environment variable naming the kubeconfig of the
// real single-node Kubernetes cluster the tests use: the file that
// `e2e/testenv/kubernetes.sh up` prints as its last line, or the one
// with-services.sh sets while it starts that cluster in the background.
const KubeconfigEnv = "HOIST_TEST_KUBECONFIG"

// GPUResource is the extended resource FakeGPU advertises, NVIDIA's device
// plugin's name, and GPUProductLabel the node label naming the GPU model, as
// NVIDIA's GPU feature discovery sets it
// (https://github.com/NVIDIA/k8s-device-plugin#catalog-of-labels).
const (
	GPUResource     corev1.ResourceName = "nvidia.com/gpu"
	GPUProductLabel                     = "nvidia.com/gpu.product"
)

// TestLabel is put on every object the helpers below create, so that a
// leftover one can be told apart from the tested code's objects.
const TestLabel = "hoist-test"

// kubeStartLimit bounds the wait for a cluster with-services.sh is starting:
// a first start builds the binaries (minutes), a cached one takes seconds.
const kubeStartLimit = 30 * time.Minute

// A KubeCluster is the real Kubernetes cluster the tests run against: an API
// server, scheduler, controller manager and one kubelet running real pods
// (e2e/testenv/kubernetes.sh). It is shared by every test on the machine, so
// tests create their objects in namespaces of their own (Namespace) and
// change the node only through the helpers below, which serialize.
type KubeCluster struct {
	// Kubeconfig is the path of the cluster's admin kubeconfig
	// (a system:masters client certificate).
	Kubeconfig string
	// Config is the REST config made from Kubeconfig.
	Config *rest.Config
	// Client is a typed client for the cluster.
	Client kubernetes.Interface
	// Node is the name of the cluster's node.
	Node string
	// state is kubernetes.sh's state directory, "" when Kubeconfig is not
	// one of its clusters (ImportImage and FakeGPU's lock need it).
	state string
}

var (
	kubeMu       sync.Mutex
	kubeClusters = map[string]*KubeCluster{}
)

// Kubernetes returns the cluster named by HOIST_TEST_KUBECONFIG. While
// with-services.sh is still starting it (the file is not there yet and its
// .log is), it waits for the start to end. An unset variable, or a cluster
// that did not start, ends the test through Missing: a skip on a developer's
// machine, a failure under CI=true.
func Kubernetes(t testing.TB) *KubeCluster {
	t.Helper()
	path := os.Getenv(KubeconfigEnv)
	if path == "" {
		Missing(t, "kubernetes: %s is unset; start the cluster with `bash e2e/testenv/kubernetes.sh up` (as root) "+
			"and set %s to the KUBECONFIG it prints, or run the tests through e2e/testenv/with-services.sh",
			KubeconfigEnv, KubeconfigEnv)
	}
	kubeMu.Lock()
	defer kubeMu.Unlock()
	if c, ok := kubeClusters[path]; ok {
		return c
	}
	waitKubeconfig(t, path)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubernetes: load %s: %v", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes: client for %s: %v", path, err)
	}
	c := &KubeCluster{Kubeconfig: path, Config: cfg, Client: client}
	c.Node = waitNode(t, client)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(real), "bin")); err == nil {
			c.state = filepath.Dir(real)
		}
	}
	kubeClusters[path] = c
	return c
}

// waitKubeconfig returns once the kubeconfig at path exists, waiting while
// with-services.sh starts the cluster: it writes path.log at once, path (a
// symbolic link) when the cluster is up, and path.rc when the start ends.
func waitKubeconfig(t testing.TB, path string) {
	t.Helper()
	end := time.Now().Add(kubeStartLimit)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok && dl.Add(-time.Minute).Before(end) {
			end = dl.Add(-time.Minute)
		}
	}
	logged := time.Time{}
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if rc, err := os.ReadFile(path + ".rc"); err == nil {
			Missing(t, "kubernetes: the cluster did not start (exit status %s): %s",
				strings.TrimSpace(string(rc)), logTail(path+".log", 20))
		}
		if _, err := os.Stat(path + ".log"); err != nil {
			Missing(t, "kubernetes: %s=%s does not exist; start the cluster with `bash e2e/testenv/kubernetes.sh up`",
				KubeconfigEnv, path)
		}
		if time.Now().After(end) {
			t.Fatalf("kubernetes: the cluster is still starting after %s: %s", kubeStartLimit, logTail(path+".log", 20))
		}
		if time.Since(logged) > time.Minute {
			t.Logf("kubernetes: waiting for the cluster with-services.sh is starting: %s", logTail(path+".log", 1))
			logged = time.Now()
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("kubernetes: waiting for the cluster: %v", t.Context().Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitNode waits (a minute at most: a cluster started by hand may still be
// coming up) until the API server is ready and the cluster has a Ready
// node, and returns that node's name.
func waitNode(t testing.TB, client kubernetes.Interface) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var last error
	for {
		node, err := readyNode(ctx, client)
		if err == nil {
			return node
		}
		last = err
		select {
		case <-ctx.Done():
			Missing(t, "kubernetes: the cluster does not answer: %v", last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func readyNode(ctx context.Context, client kubernetes.Interface) (string, error) {
	if err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		return "", fmt.Errorf("readyz: %w", err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return n.Name, nil
			}
		}
	}
	return "", fmt.Errorf("no Ready node among %d", len(nodes.Items))
}

// script returns the path of kubernetes.sh.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "kubernetes.sh")
}

// ImportImage copies images from this machine's Docker Engine into the
// cluster's container runtime (there is no registry: pods must use
// imagePullPolicy IfNotPresent or Never). An image already imported with the
// same Docker image ID is not copied again. Images stay in the cluster after
// the test (other tests may run them); `kubernetes.sh down` removes them.
func (c *KubeCluster) ImportImage(t testing.TB, images ...string) {
	t.Helper()
	if c.state == "" {
		t.Fatalf("kubernetes: %s is not a cluster of kubernetes.sh: cannot import images", c.Kubeconfig)
	}
	cmd := exec.CommandContext(t.Context(), "bash", append([]string{script(), "import"}, images...)...)
	cmd.Env = append(os.Environ(), "HOIST_K8S_STATE="+c.state)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubernetes: import %s: %v: %s", strings.Join(images, " "), err, out)
	}
}

// Namespace creates a namespace named prefix-<random> for the test's
// objects, deleted (with whatever is left in it) when the test ends; the
// deletion is not waited for. It returns once the namespace's default
// ServiceAccount exists (the controller manager adds it): pods are refused
// until then.
func (c *KubeCluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   prefix + "-" + randomHex(t, 4),
		Labels: map[string]string{TestLabel: "namespace"},
	}}
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubernetes: create namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("kubernetes: delete namespace %s: %v", ns.Name, err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return ns.Name
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kubernetes: the default ServiceAccount of namespace %s: %v", ns.Name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FakeGPU makes the node advertise count GPUs of the given product (for
// example "NVIDIA-A100-SXM4-40GB") until the test ends: the node's status
// gets the extended resource nvidia.com/gpu in its capacity and allocatable
// (https://kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/),
// and the node the label nvidia.com/gpu.product. The scheduler then places
// pods with nvidia.com/gpu limits on it up to count, and the kubelet admits
// them (no device is given to the containers). Tests that fake GPUs run one
// at a time across the machine (LockNode's lock, held until the test ends).
func (c *KubeCluster) FakeGPU(t testing.TB, count int, product string) {
	t.Helper()
	unlock := c.lockNode(t)
	nodes := c.Client.CoreV1().Nodes()
	patch := func(ctx context.Context, gpus, label any) error {
		status := map[string]any{"status": map[string]any{
			"capacity":    map[string]any{string(GPUResource): gpus},
			"allocatable": map[string]any{string(GPUResource): gpus},
		}}
		if _, err := nodes.PatchStatus(ctx, c.Node, mustJSON(status)); err != nil {
			return fmt.Errorf("patch status of node %s: %w", c.Node, err)
		}
		labels := map[string]any{"metadata": map[string]any{"labels": map[string]any{GPUProductLabel: label}}}
		if _, err := nodes.Patch(ctx, c.Node, types.MergePatchType, mustJSON(labels), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s: %w", c.Node, err)
		}
		return nil
	}
	t.Cleanup(func() {
		defer unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A null in a merge patch removes the key.
		if err := patch(ctx, nil, nil); err != nil {
			t.Errorf("kubernetes: remove the fake GPUs: %v", err)
		}
	})
	if err := patch(t.Context(), strconv.Itoa(count), product); err != nil {
		t.Fatalf("kubernetes: fake GPUs: %v", err)
	}
	n, err := nodes.Get(t.Context(), c.Node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubernetes: get node %s: %v", c.Node, err)
	}
	if q := n.Status.Allocatable[GPUResource]; q.Value() != int64(count) {
		t.Fatalf("kubernetes: node %s allocatable %s = %s after the patch, want %d", c.Node, GPUResource, q.String(), count)
	}
}

// LockNode takes, until the test ends, the machine-wide lock that FakeGPU
// holds while the node advertises fake GPUs, waiting for the tests (of any
// test binary) holding it: a test that reads the node's resources (offers)
// takes it to see the node as it is, and a test whose pods take the node's
// CPUs takes it so that those tests see the node alone. Within one test
// binary it is counted, so a test holding it may call FakeGPU.
func (c *KubeCluster) LockNode(t testing.TB) {
	t.Helper()
	t.Cleanup(c.lockNode(t))
}

// lockNode takes the lock LockNode describes and returns the function
// releasing it.
func (c *KubeCluster) lockNode(t testing.TB) func() {
	t.Helper()
	dir := c.state
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "node-"+c.Node+".lock")
	// Within one test binary the lock is taken once and counted, so that a
	// test holding it may call FakeGPU (tests of one package that use the
	// node do not run in parallel).
	heldMu.Lock()
	defer heldMu.Unlock()
	if h := held[path]; h != nil {
		h.n++
		return func() { releaseHeld(path) }
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("kubernetes: open %s: %v", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			t.Fatalf("kubernetes: lock %s: %v", path, err)
		}
		select {
		case <-t.Context().Done():
			_ = f.Close()
			t.Fatalf("kubernetes: waiting for %s: %v", path, t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	held[path] = &heldLock{f: f, n: 1}
	return func() { releaseHeld(path) }
}

// heldLock is a node lock this test binary holds, and how many holders it
// has.
type heldLock struct {
	f *os.File
	n int
}

var (
	heldMu sync.Mutex
	held   = map[string]*heldLock{}
)

// releaseHeld drops one holder of the lock at path, and the lock with the
// last (closing the file releases it).
func releaseHeld(path string) {
	heldMu.Lock()
	defer heldMu.Unlock()
	h := held[path]
	if h == nil {
		return
	}
	if h.n--; h.n == 0 {
		_ = h.f.Close()
		delete(held, path)
	}
}

// HostPathVolumes creates a storage class of the test's own (no provisioner)
// and n PersistentVolumes of that class, of the given size (for example
// "1Gi") and every access mode but ReadWriteOncePod, each a hostPath
// directory on the node, and returns the class's name: a claim of that class
// binds to one of them, as it would to a provisioned volume. When the test
// ends the volumes, the claims bound to them and the class are deleted
// (volumes and claims go once no pod uses them), and the directories removed.
func (c *KubeCluster) HostPathVolumes(t testing.TB, n int, size string) string {
	t.Helper()
	qty, err := resource.ParseQuantity(size)
	if err != nil {
		t.Fatalf("kubernetes: volume size %q: %v", size, err)
	}
	class := "hoist-test-" + randomHex(t, 4)
	labels := map[string]string{TestLabel: class}
	root := c.state
	if root == "" {
		root = os.TempDir()
	}
	root = filepath.Join(root, "test-volumes", class)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatalf("kubernetes: %v", err)
	}
	storage := c.Client.StorageV1().StorageClasses()
	pvs := c.Client.CoreV1().PersistentVolumes()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, err := pvs.List(ctx, metav1.ListOptions{LabelSelector: TestLabel + "=" + class})
		if err != nil {
			t.Errorf("kubernetes: list volumes of %s: %v", class, err)
		}
		for _, pv := range list.Items {
			if ref := pv.Spec.ClaimRef; ref != nil {
				err := c.Client.CoreV1().PersistentVolumeClaims(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("kubernetes: delete claim %s/%s: %v", ref.Namespace, ref.Name, err)
				}
			}
			if err := pvs.Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("kubernetes: delete volume %s: %v", pv.Name, err)
			}
		}
		if err := storage.Delete(ctx, class, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("kubernetes: delete storage class %s: %v", class, err)
		}
		_ = os.RemoveAll(root) // a pod still ending may hold it; `down` removes it then
	})
	immediate := storagev1.VolumeBindingImmediate
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: class, Labels: labels},
		Provisioner:       "kubernetes.io/no-provisioner",
		ReclaimPolicy:     &retain,
		VolumeBindingMode: &immediate,
	}
	if _, err := storage.Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubernetes: create storage class %s: %v", class, err)
	}
	dirType := corev1.HostPathDirectoryOrCreate
	for i := range n {
		name := fmt.Sprintf("%s-%d", class, i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: qty},
				AccessModes: []corev1.PersistentVolumeAccessMode{
					corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany,
				},
				PersistentVolumeReclaimPolicy: retain,
				StorageClassName:              class,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(root, name), Type: &dirType},
				},
			},
		}
		if _, err := pvs.Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
			t.Fatalf("kubernetes: create volume %s: %v", name, err)
		}
	}
	return class
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// mustJSON encodes a patch built from maps of strings (it cannot fail).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
