package reconciler

import (
	"errors"
	"strings"
	"testing"

	"hoist/store"
)

// TestApply_failedFleetApplyIsPlannedAgain: a fleet step whose own apply
// fails (here: an SSH fleet on a server with no SSH backend) is not
// recorded as applied, so the next sync plans it again and fails the same
// way instead of taking it for done.
func TestApply_failedFleetApplyIsPlannedAgain(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: hosts\nssh_config:\n  user: ubuntu\n  identity_file: ~/.ssh/id\n  hosts: [127.0.0.201]\n",
	})
	for range 2 {
		_, err := f.c.syncOnce(f.ctx, true)
		if err == nil || !strings.Contains(err.Error(), "no backend of type ssh") {
			t.Fatalf("sync = %v, want the fleet's apply to fail for want of an SSH backend", err)
		}
		if r, err := f.st.GetResource(f.ctx, store.DefaultProject, "fleet", "hosts"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("resource after the failed apply: applied revision %q, %v; want none recorded", r.AppliedRevision, err)
		}
	}
}
