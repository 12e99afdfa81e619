package source_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"hoist/reconciler/source"
)

// The revision pipeline's loop: run the source, and on every nudge resolve
// the latest revision; read its files only when it moved.
func Example() {
	dir, _ := os.MkdirTemp("", "specs")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.dstack.yml"), []byte("type: task\n"), 0o644)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := source.Open(ctx, source.Config{Repo: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	go src.Run(ctx)

	applied := ""
	for range src.Changes() { // Run nudges once when its watchers are up
		rev, err := src.Latest(ctx)
		if err != nil || rev.ID == applied {
			continue // an error here is logged and retried on the next nudge
		}
		snap, err := src.Checkout(ctx, rev)
		if err != nil {
			continue
		}
		names, _ := fs.Glob(snap.FS, "*.yml")
		fmt.Println(names)
		snap.Close()
		applied = rev.ID
		break // a real pipeline keeps looping until ctx is done
	}
	// Output: [hello.dstack.yml]
}
