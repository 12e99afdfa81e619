package shim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"hoist/agents/api"
)

// TaskLogs reads the job log that the task's runner left in the task's
// runner directory: up to limit records with Seq > after (from the oldest
// kept, if those were acknowledged and deleted), about maxBytes at most. It
// serves the logs after the runner has exited (until RemoveTask); while the
// runner runs, ask the runner. The log is complete once the task is
// terminated.
func (s *Shim) TaskLogs(id string, after int64, limit, maxBytes int) ([]byte, error) {
	s.mu.Lock()
	_, ok := s.tasks[id]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, errNotFound)
	}
	dir := filepath.Join(s.RunnerDir(id), api.RunnerLogDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job log: %w", err)
	}
	var out []byte
	count := 0
	for i, e := range ents { // ReadDir sorts by name, which is log order
		if i+1 < len(ents) && segmentFirst(ents[i+1].Name()) <= after+1 {
			continue // every record of this segment is <= after
		}
		var done bool
		out, count, done, err = readSegment(filepath.Join(dir, e.Name()), after, limit, maxBytes, out, count)
		if err != nil || done {
			return out, err
		}
	}
	return out, nil
}

func segmentFirst(name string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(name, ".frames"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// readSegment appends the frames of one segment file with Seq > after to
// out; done reports that limit or maxBytes was reached.
func readSegment(path string, after int64, limit, maxBytes int, out []byte, count int) ([]byte, int, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, count, false, nil // acknowledged and deleted meanwhile
	}
	if err != nil {
		return out, count, false, fmt.Errorf("open job log: %w", err)
	}
	defer f.Close()
	var h [api.FrameHeaderSize]byte
	var off int64
	for {
		if count >= limit {
			return out, count, true, nil
		}
		if _, err := f.ReadAt(h[:], off); err != nil {
			if errors.Is(err, io.EOF) {
				return out, count, false, nil
			}
			return out, count, false, fmt.Errorf("read job log: %w", err)
		}
		seq := int64(binary.BigEndian.Uint64(h[0:8]))
		n := int64(api.FrameHeaderSize) + int64(binary.BigEndian.Uint32(h[17:21]))
		if seq > after {
			if count > 0 && len(out)+int(n) > maxBytes {
				return out, count, true, nil
			}
			frame := make([]byte, n)
			if _, err := f.ReadAt(frame, off); err != nil {
				return out, count, true, nil // a record still being written
			}
			out = append(out, frame...)
			count++
		}
		off += n
	}
}

func (s *Shim) handleLogs(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after_seq"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 {
		limit = 1000
	}
	maxBytes, _ := strconv.Atoi(q.Get("max_bytes"))
	if maxBytes <= 0 {
		maxBytes = 4 << 20
	}
	frames, err := s.TaskLogs(req.PathValue("id"), after, limit, min(maxBytes, 64<<20))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", api.LogFramesContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(frames)))
	_, _ = w.Write(frames)
}
