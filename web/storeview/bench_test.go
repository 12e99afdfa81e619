package storeview_test

import (
	"fmt"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
)

// BenchmarkView_ListRunsPage lists one page (101 runs) of 1,000.
func BenchmarkView_ListRunsPage(b *testing.B) {
	v, st := openB(b)
	ctx := b.Context()
	for i := range 1000 {
		r := &store.Run{Name: fmt.Sprintf("run-%04d", i), Type: "task", Status: store.RunDone, SubmittedAt: now.Add(-time.Duration(i) * time.Minute)}
		if err := st.CreateRun(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := v.ListRuns(ctx, web.RunFilter{Limit: 101}); err != nil {
			b.Fatal(err)
		}
	}
}
