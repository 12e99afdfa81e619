package runner

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"hoist/agents/api"
)

// indexEvery is how many records lie between two entries of the sparse
// offset index.
const indexEvery = 64

// logStore is an append-only, sequence-numbered log of job output kept in one
// file of api log frames. One writer appends; any number of readers read.
type logStore struct {
	mu      sync.Mutex
	f       *os.File
	size    int64   // bytes in f
	lastSeq int64   // seq of the last record appended
	data    int64   // data bytes appended (for the quota)
	index   []int64 // index[i] = offset of record i*indexEvery+1
	closed  bool    // no more records will be appended
	changed chan struct{}
	buf     []byte
}

func openLogStore(path string) (*logStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	return &logStore{f: f, changed: make(chan struct{})}, nil
}

// append writes one record and returns the data bytes appended so far.
func (s *logStore) append(stream string, data []byte, t time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.data, errors.New("log store closed")
	}
	seq := s.lastSeq + 1
	s.buf = api.AppendFrame(s.buf[:0], api.LogLine{Seq: seq, Time: t, Stream: stream, Data: data})
	if _, err := s.f.WriteAt(s.buf, s.size); err != nil {
		return s.data, fmt.Errorf("write log: %w", err)
	}
	if (seq-1)%indexEvery == 0 {
		s.index = append(s.index, s.size)
	}
	s.size += int64(len(s.buf))
	s.lastSeq = seq
	s.data += int64(len(data))
	s.notifyLocked()
	return s.data, nil
}

// close marks the end of the log: readers learn that nothing follows.
func (s *logStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.notifyLocked()
	}
}

func (s *logStore) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// status returns the last seq, whether the log is closed, and a channel that
// is closed on the next change.
func (s *logStore) status() (last int64, closed bool, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeq, s.closed, s.changed
}

// offsetOf returns the file offset of the record with seq, which must exist.
func (s *logStore) offsetOf(seq int64) (int64, error) {
	s.mu.Lock()
	i := (seq - 1) / indexEvery
	off := s.index[i]
	s.mu.Unlock()
	cur := i*indexEvery + 1
	var h [api.FrameHeaderSize]byte
	for cur < seq {
		if _, err := s.f.ReadAt(h[:], off); err != nil {
			return 0, fmt.Errorf("read log index: %w", err)
		}
		off += api.FrameHeaderSize + int64(binary.BigEndian.Uint32(h[17:21]))
		cur++
	}
	return off, nil
}

// read returns the encoded frames of up to limit records with Seq > after,
// at most about maxBytes (always at least one record when one exists), the
// seq of the last record returned, and whether that is the log's last record.
func (s *logStore) read(after int64, limit int, maxBytes int) ([]byte, int64, bool, error) {
	s.mu.Lock()
	last, closed, size := s.lastSeq, s.closed, s.size
	s.mu.Unlock()
	if after < 0 {
		after = 0
	}
	if after >= last {
		return nil, last, closed && after >= last, nil
	}
	off, err := s.offsetOf(after + 1)
	if err != nil {
		return nil, after, false, err
	}
	n := min(int64(maxBytes), size-off)
	buf := make([]byte, n)
	if _, err := s.f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, after, false, fmt.Errorf("read log: %w", err)
	}
	end, seq, count := 0, after, 0
	for count < limit && end+api.FrameHeaderSize <= len(buf) {
		l := api.FrameHeaderSize + int(binary.BigEndian.Uint32(buf[end+17:end+21]))
		if end+l > len(buf) {
			break
		}
		end += l
		seq++
		count++
	}
	if count == 0 {
		// The first record is larger than maxBytes: return it alone.
		var h [api.FrameHeaderSize]byte
		if _, err := s.f.ReadAt(h[:], off); err != nil {
			return nil, after, false, fmt.Errorf("read log: %w", err)
		}
		buf = make([]byte, api.FrameHeaderSize+int(binary.BigEndian.Uint32(h[17:21])))
		if _, err := s.f.ReadAt(buf, off); err != nil {
			return nil, after, false, fmt.Errorf("read log: %w", err)
		}
		return buf, after + 1, closed && after+1 == last, nil
	}
	return buf[:end], seq, closed && seq == last, nil
}

// seqAt returns the seq of the last record read before t (0 when none), so
// that reading after it yields the records read at or after t.
func (s *logStore) seqAt(t time.Time) (int64, error) {
	s.mu.Lock()
	last, size := s.lastSeq, s.size
	s.mu.Unlock()
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 64<<10)
	var h [api.FrameHeaderSize]byte
	tn := t.UnixNano()
	for seq := int64(1); seq <= last; seq++ {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return 0, fmt.Errorf("scan log: %w", err)
		}
		if int64(binary.BigEndian.Uint64(h[8:16])) >= tn {
			return seq - 1, nil
		}
		if _, err := r.Discard(int(binary.BigEndian.Uint32(h[17:21]))); err != nil {
			return 0, fmt.Errorf("scan log: %w", err)
		}
	}
	return last, nil
}
