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

	"hoist/agents/api"
)

// logFile is the runner's log file in its home directory (runner.LogFile).
const logFile = "job.log"

// TaskLogs reads the job log that the task's runner left in the task's
// runner directory: up to limit records with Seq > after, about maxBytes at
// most. It serves the logs after the runner has exited (until RemoveTask);
// while the runner runs, ask the runner. The log is complete when the task
// is terminated.
func (s *Shim) TaskLogs(id string, after int64, limit, maxBytes int) ([]byte, error) {
	s.mu.Lock()
	_, ok := s.tasks[id]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, errNotFound)
	}
	f, err := os.Open(filepath.Join(s.RunnerDir(id), logFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open job log: %w", err)
	}
	defer f.Close()
	var h [api.FrameHeaderSize]byte
	var off int64
	var out []byte
	count := 0
	for count < limit {
		if _, err := f.ReadAt(h[:], off); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("read job log: %w", err)
		}
		seq := int64(binary.BigEndian.Uint64(h[0:8]))
		n := int64(api.FrameHeaderSize) + int64(binary.BigEndian.Uint32(h[17:21]))
		if seq > after {
			if count > 0 && len(out)+int(n) > maxBytes {
				break
			}
			frame := make([]byte, n)
			if _, err := f.ReadAt(frame, off); err != nil {
				break // a record still being written
			}
			out = append(out, frame...)
			count++
		}
		off += n
	}
	return out, nil
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
