package store

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClaim_sqliteWalksTheDueIndex guards claim performance: with a status
// filter, SQLite must read due rows in order from the (status,
// last_processed_at) index instead of sorting every row of that status on
// each claim.
func TestClaim_sqliteWalksTheDueIndex(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "hoist.db"), Options{})
	insertDueRuns(t, s, 100)
	q := claimQuery(s.db, s.Dialect(), time.Now(), ClaimRequest{
		Table: "runs", Limit: 16, Where: "status = ?", Args: []any{RunSubmitted},
	}, "batch/")
	rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	joined := strings.Join(plan, "\n")
	if !strings.Contains(joined, "runs_status_due_idx") || strings.Contains(joined, "TEMP B-TREE") {
		t.Errorf("claim plan does not walk runs_status_due_idx in order:\n%s", joined)
	}
}
