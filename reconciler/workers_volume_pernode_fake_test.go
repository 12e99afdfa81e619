package reconciler

import (
	"strconv"
	"strings"
	"testing"

	"hoist/store"
)

// TestWorkers_perNodeVolumesByNodeRank: a two-node task mounting
// `data-${{ dstack.node_rank }}` gets on each node the volume of its rank
// (data-0 on the master, data-1 on the worker), attached to that node's
// instance, in the volumes' region although another is cheaper; with a
// node's volume missing the cluster is never placed and fails with
// volume_error naming it.
func TestWorkers_perNodeVolumesByNodeRank(t *testing.T) {
	vol := func(name string) string {
		return strings.Replace(dataVolume, "name: data", "name: "+name, 1)
	}
	task := "type: task\nname: train\nimage: busybox\nnodes: 2\ncommands: [sleep 1h]\nvolumes: [\"data-${{ dstack.node_rank }}:/data\"]\n"

	t.Run("each node mounts its own", func(t *testing.T) {
		f := newFixture(t, map[string]string{
			"fleet.dstack.yml": clusterFleet,
			"v0.dstack.yml":    vol("data-0"),
			"v1.dstack.yml":    vol("data-1"),
			"task.dstack.yml":  task,
		})
		be := f.withVolumeBackend()
		if res := f.sync(); res != resultSynced {
			t.Fatalf("sync = %s", res)
		}
		insts := f.provisionNodes("train")
		for num, inst := range insts {
			if inst.Region != "west" {
				t.Errorf("node %d's instance is in %s, want west (its volume's region)", num, inst.Region)
			}
			j := f.stepNode("train", num, store.JobRunning)
			ts, ok := be.TaskSpec(inst.ID, j.ID)
			want := "data-" + strconv.Itoa(num)
			if !ok || len(ts.NetworkVolumes) != 1 || ts.NetworkVolumes[0].Name != want || ts.NetworkVolumes[0].Path != "/data" {
				t.Fatalf("node %d's task volumes = %+v, want %s at /data", num, ts.NetworkVolumes, want)
			}
			v := f.volume(want)
			atts, err := f.st.ListVolumeAttachments(f.ctx, v.ID, "")
			if err != nil || len(atts) != 1 || atts[0].InstanceID != inst.ID || decodeAttachment(atts[0]).JobID != j.ID {
				t.Errorf("attachments of %s = %+v, %v; want one, for node %d on %s", want, atts, err, num, inst.ID)
			}
		}
	})

	t.Run("a node's volume missing", func(t *testing.T) {
		f := newFixture(t, map[string]string{
			"fleet.dstack.yml": clusterFleet,
			"v0.dstack.yml":    vol("data-0"),
			"task.dstack.yml":  task,
		})
		f.withVolumeBackend()
		if res := f.sync(); res != resultSynced {
			t.Fatalf("sync = %s", res)
		}
		m := f.node("train", 0)
		if _, err := f.c.reconcileJob(f.ctx, m.ID); err != nil {
			t.Fatal(err)
		}
		m = f.node("train", 0)
		if m.Status != store.JobTerminating || m.TerminationReason != reasonVolumeError || !strings.Contains(m.TerminationMessage, "volume data-1 not found") || m.InstanceID != "" {
			t.Fatalf("master = %s %s %q on %q, want terminating volume_error naming data-1, unplaced", m.Status, m.TerminationReason, m.TerminationMessage, m.InstanceID)
		}
	})
}
