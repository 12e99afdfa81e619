package shim_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// numberedFile writes lines 1..n (one number per line) into numbers.txt in a
// fresh directory and returns the directory and the file's size.
func numberedFile(t testing.TB, n int) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "numbers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for i := 1; i <= n; i++ {
		buf = strconv.AppendInt(buf[:0], int64(i), 10)
		buf = append(buf, '\n')
		_, _ = w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, fi.Size()
}
