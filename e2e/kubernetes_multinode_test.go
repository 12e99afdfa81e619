package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/e2e/testenv"
)

// kubeClusterFleet is a `placement: cluster` fleet on the cluster (the
// fleets that take multi-node runs): it grows by a reservation of a slice
// of the node for each node of a run.
const kubeClusterFleet = "type: fleet\nname: k8scluster\nnodes: 0..2\nplacement: cluster\nbackends: [kubernetes]\nidle_duration: 1h\n" +
	kubeResources + kubeDisk

// TestKubernetes_multiNodeTaskTalksOverThePodNetwork drives a `nodes: 2`
// task on a Kubernetes `placement: cluster` fleet through `hoist serve` and
// Git: each node runs as a pod, the cluster environment names the pods' IPs
// (DSTACK_MASTER_NODE_IP is rank 0's pod's, DSTACK_NODES_IPS both in rank
// order), rank 1 connects with busybox nc to the port rank 0 listens on at
// $DSTACK_MASTER_NODE_IP over the pod network, both print their
// environment, the run is done, and no pod or secret of it is left; then a
// two-node task with startup_order master-first runs to done too. It
// prints commit → all nodes running.
func TestKubernetes_multiNodeTaskTalksOverThePodNetwork(t *testing.T) {
	e := newKubeEnv(t)
	// Its two pods take the node's two CPUs.
	e.kc.LockNode(t)
	e.r.write("k8scluster.dstack.yml", kubeClusterFleet)
	e.r.commit("a cluster fleet on Kubernetes")
	if st := e.s.sync(); len(st.Errors) > 0 {
		t.Fatalf("revision rejected: %v", st.Errors)
	}

	// The pods are deleted once their jobs end: their IPs are read while
	// they exist, by rank (the pod name holds the job name,
	// <run>-<rank>-<replica>).
	podIPs := e.watchPodIPs(t, "hoist-pair-")

	e.r.write("pair.dstack.yml", fmt.Sprintf(`type: task
name: pair
image: %s
nodes: 2
fleets: [k8scluster]
%s%s`, testenv.BusyboxImage, pairCommands("7100", 150), kubeResources))
	committed := time.Now()
	e.r.commit("a two-node task on the cluster fleet")
	run := e.finished("pair", "done")

	jobs := e.s.clusterJobs("pair")
	if len(jobs) != 2 || len(run.Jobs) != 2 {
		t.Fatalf("pair jobs: %+v, want 2 (no resubmission)", jobs)
	}
	master, worker := pairNodes(t, jobs)
	ips := podIPs()
	masterIP, workerIP := ips["0"], ips["1"]
	if masterIP == "" || workerIP == "" || masterIP == workerIP {
		t.Fatalf("pod IPs by rank %v, want two", ips)
	}
	for _, ip := range []string{masterIP, workerIP} {
		if a, err := netip.ParseAddr(ip); err != nil || a.IsLoopback() {
			t.Fatalf("pod IP %q, want an address on the pod network", ip)
		}
	}
	checkPairLogs(t, e.s, master, worker, masterIP, workerIP)
	_, last := startSpan([]clusterJob{master, worker})
	t.Logf("figures: 2-node run on Kubernetes pods: commit → all nodes running %s", last.Sub(committed).Round(time.Millisecond))

	// The run's pods and secrets go with its jobs.
	var left []string
	waitFor(t, kubeWithin, func() string { return fmt.Sprintf("the pods and secrets of run pair gone (left: %v)", left) }, func() bool {
		left = slices.DeleteFunc(e.ours(), func(o string) bool { return !strings.Contains(o, "/hoist-pair-") })
		return len(left) == 0
	})

	// With startup_order master-first the worker's pod is created with
	// the master's (its address is part of the master's cluster) and its
	// job starts once the master's runs.
	e.r.write("ordered.dstack.yml", task("ordered", "  - echo rank $DSTACK_NODE_RANK of $DSTACK_NODES_NUM\n")+
		"nodes: 2\nstartup_order: master-first\nfleets: [k8scluster]\n"+kubeResources)
	e.r.commit("a two-node task whose master starts first")
	e.finished("ordered", "done")
	for _, j := range e.s.clusterJobs("ordered") {
		parts := strings.Split(j.JobName, "-")
		if want := "rank " + parts[len(parts)-2] + " of 2\n"; j.Status != "done" || e.s.jobLogs("ordered", j.ID) != want {
			t.Errorf("ordered job %s: %s, logs %q; want done with %q", j.JobName, j.Status, e.s.jobLogs("ordered", j.ID), want)
		}
	}
}

// watchPodIPs records, until the test ends, the IP of each pod of the
// env's namespace whose name begins with prefix, by the rank in its name
// (prefix, then the rank, then "-"); the function returned reads them.
func (e *kubeEnv) watchPodIPs(t *testing.T, prefix string) func() map[string]string {
	t.Helper()
	var mu sync.Mutex
	ips := map[string]string{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			l, err := e.kc.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: managedBy})
			if err == nil {
				mu.Lock()
				for _, p := range l.Items {
					rank, _, ok := strings.Cut(strings.TrimPrefix(p.Name, prefix), "-")
					if ok && strings.HasPrefix(p.Name, prefix) && p.Status.PodIP != "" {
						ips[rank] = p.Status.PodIP
					}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(ips)
	}
}
