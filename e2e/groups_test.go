package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// TestGroups_eachGroupRunsItsCommandsOnItsOwnHost drives a task with two
// groups of one node each through `hoist serve` and Git, on a
// `placement: cluster` SSH fleet of two simulated hosts (network
// namespaces with their own addresses): the node of group 0 listens with
// busybox nc, the node of group 1 connects to
// `${{ groups[0].nodes[0].IP_ADDRESS }}` (the server replaces it by the
// first node's host address before the job starts); each job runs its own
// group's commands on a host of its own, and the run is done.
func TestGroups_eachGroupRunsItsCommandsOnItsOwnHost(t *testing.T) {
	e, _ := newNetnsFleetEnv(t, 2)
	s, r := e.s, e.r

	r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...)+"placement: cluster\n")
	r.commit("cluster fleet of two namespace hosts")
	s.waitInstances(2*sshWithin, "both hosts idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 2 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	})
	hostIP := map[string]string{} // host address of each instance, by name
	for _, rec := range s.sshRecords() {
		hostIP[rec.Name] = rec.Host.Hostname
	}

	// The server's nc reads its stdin from a FIFO the shell holds open: busybox
	// nc shuts its sending side as soon as its stdin ends, and a client that
	// sees that before it has sent its line exits without sending it.
	r.write("duo.dstack.yml", fmt.Sprintf(`type: task
name: duo
image: %s
fleets: [%s]
groups:
  - name: server
    commands:
      - echo "server rank=$DSTACK_NODE_RANK nodes=$DSTACK_NODES_NUM"
      - mkfifo /tmp/nc-in; exec 3<>/tmp/nc-in
      - nc -l -p 7200 <&3
  - name: client
    commands:
      - echo "client rank=$DSTACK_NODE_RANK server=${{ groups[0].nodes[0].IP_ADDRESS }}"
      - |
        for i in $(seq 100); do
          echo "hello from the client group" | nc ${{ groups[0].nodes[0].IP_ADDRESS }} 7200 && exit 0
          sleep 0.2
        done
        exit 1
`, testenv.BusyboxImage, sshFleetName))
	committed := time.Now()
	sha := r.commit("a task of two groups")
	s.waitRun("duo", sha, "done", 2*sshWithin)
	t.Logf("figures: a task of two groups on namespace hosts: commit → run done %s", time.Since(committed).Round(time.Millisecond))

	jobs := s.clusterJobs("duo")
	if len(jobs) != 2 {
		t.Fatalf("duo jobs: %+v, want one per group (no resubmission)", jobs)
	}
	byRank := map[string]clusterJob{}
	for _, j := range jobs {
		if j.Status != "done" || j.StartedAt == nil {
			t.Fatalf("duo job %+v, want done with a start time", j)
		}
		// dstack's job name: <run>-<job_num>-<replica_num>.
		parts := strings.Split(j.JobName, "-")
		byRank[parts[len(parts)-2]] = j
	}
	server, client := byRank["0"], byRank["1"]
	if server.Instance == "" || client.Instance == "" || server.Instance == client.Instance {
		t.Fatalf("duo ran on %q (group 0) and %q (group 1), want the two hosts", server.Instance, client.Instance)
	}
	var withGroups struct {
		Jobs []struct {
			ID    string `json:"id"`
			Group string `json:"group"`
		} `json:"jobs"`
	}
	if code := s.getJSON("/api/v1/runs/duo", &withGroups); code != 200 {
		t.Fatalf("GET /api/v1/runs/duo: %d", code)
	}
	for _, j := range withGroups.Jobs {
		if want := map[string]string{server.ID: "server", client.ID: "client"}[j.ID]; j.Group != want {
			t.Errorf("job %s's group = %q, want %q", j.ID, j.Group, want)
		}
	}
	serverIP := hostIP[server.Instance]
	if got := s.jobLogs("duo", client.ID); !strings.Contains(got, "client rank=1 server="+serverIP+"\n") || strings.Contains(got, "server rank") {
		t.Errorf("group 1's logs %q, want its own commands with group 0's address %s", got, serverIP)
	}
	// What nc received may reach the store a moment after the run is done.
	var serverLogs string
	waitFor(t, 10*time.Second, func() string {
		return fmt.Sprintf("group 0's logs (on %s) with its own line and group 1's: %q", serverIP, serverLogs)
	}, func() bool {
		serverLogs = s.jobLogs("duo", server.ID)
		return strings.Contains(serverLogs, "server rank=0 nodes=2\n") && strings.Contains(serverLogs, "hello from the client group\n")
	})
	t.Logf("group 0 on %s (%s) logged %q; group 1 on %s logged %q", server.Instance, serverIP, serverLogs, client.Instance, s.jobLogs("duo", client.ID))
	if strings.Contains(serverLogs, "client rank") {
		t.Errorf("group 0 ran group 1's commands: %q", serverLogs)
	}
}
