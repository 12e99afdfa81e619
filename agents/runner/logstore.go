package runner

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"hoist/agents/api"
)

// indexEvery is how many records lie between two entries of a segment's
// sparse offset index.
const indexEvery = 64

// defaultSegmentBytes is the size at which the log starts a new segment file.
const defaultSegmentBytes = 16 << 20

// segment is one file of the log: the records first..last, as api frames.
type segment struct {
	first, last int64 // last == first-1 while empty
	path        string
	f           *os.File
	size        int64
	index       []int64 // index[i] = offset of record first+i*indexEvery
}

// logStore is the job's append-only, sequence-numbered log, kept on disk in
// segment files under one directory until the server acknowledges it (ack),
// then dropped a segment at a time. One writer appends; any number of
// readers read.
type logStore struct {
	dir      string
	segBytes int64

	// dropMu keeps ack from closing a segment file under a reader; readers
	// hold it shared, ack exclusively. Appends do not take it.
	dropMu sync.RWMutex

	mu       sync.Mutex
	segs     []*segment // ascending; the last one is written to
	lastSeq  int64
	retained int64 // bytes of the segments on disk
	acked    int64
	closed   bool // no more records will be appended
	changed  chan struct{}
	buf      []byte
}

func openLogStore(dir string, segBytes int64) (*logStore, error) {
	if segBytes <= 0 {
		segBytes = defaultSegmentBytes
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear log dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	s := &logStore{dir: dir, segBytes: segBytes, changed: make(chan struct{})}
	if err := s.newSegmentLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *logStore) newSegmentLocked() error {
	first := s.lastSeq + 1
	path := filepath.Join(s.dir, api.LogSegmentName(first))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create log segment: %w", err)
	}
	s.segs = append(s.segs, &segment{first: first, last: first - 1, path: path, f: f})
	return nil
}

// append writes one record and returns the bytes of log kept on disk.
func (s *logStore) append(stream string, data []byte, t time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.retained, errors.New("log store closed")
	}
	seg := s.segs[len(s.segs)-1]
	if seg.size >= s.segBytes {
		if err := s.newSegmentLocked(); err != nil {
			return s.retained, err
		}
		seg = s.segs[len(s.segs)-1]
	}
	seq := s.lastSeq + 1
	s.buf = api.AppendFrame(s.buf[:0], api.LogLine{Seq: seq, Time: t, Stream: stream, Data: data})
	if _, err := seg.f.WriteAt(s.buf, seg.size); err != nil {
		return s.retained, fmt.Errorf("write log: %w", err)
	}
	if (seq-seg.first)%indexEvery == 0 {
		seg.index = append(seg.index, seg.size)
	}
	seg.size += int64(len(s.buf))
	seg.last = seq
	s.lastSeq = seq
	s.retained += int64(len(s.buf))
	s.notifyLocked()
	return s.retained, nil
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

// firstSeq returns the seq of the oldest record still on disk.
func (s *logStore) firstSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.segs[0].first
}

// ack records that the reader has kept every record up to seq: segments
// that hold only such records are deleted. It returns the bytes still kept.
func (s *logStore) ack(seq int64) int64 {
	s.mu.Lock()
	if seq > s.acked {
		s.acked = min(seq, s.lastSeq)
	}
	var drop []*segment
	for len(s.segs) > 1 && s.segs[0].last <= s.acked {
		drop = append(drop, s.segs[0])
		s.retained -= s.segs[0].size
		s.segs = s.segs[1:]
	}
	retained := s.retained
	s.mu.Unlock()
	if len(drop) > 0 {
		s.dropMu.Lock()
		for _, seg := range drop {
			seg.f.Close()
			os.Remove(seg.path)
		}
		s.dropMu.Unlock()
	}
	return retained
}

// read returns the encoded frames of up to limit records with Seq > after
// (or from the oldest record kept, if those were dropped), at most about
// maxBytes (always at least one record when one exists), and whether they
// end with the log's last record.
func (s *logStore) read(after int64, limit int, maxBytes int) ([]byte, bool, error) {
	s.dropMu.RLock()
	defer s.dropMu.RUnlock()
	s.mu.Lock()
	last, closed := s.lastSeq, s.closed
	after = max(after, s.segs[0].first-1)
	segs := make([]segment, len(s.segs))
	for i, seg := range s.segs {
		segs[i] = *seg // a snapshot: appends after it are not read
	}
	s.mu.Unlock()
	var out []byte
	seq, count := after, 0
	for _, seg := range segs {
		if seg.last <= seq {
			continue
		}
		if count >= limit || (count > 0 && len(out) >= maxBytes) {
			break
		}
		var err error
		var n int
		out, n, err = seg.read(seq, limit-count, maxBytes-len(out), out)
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			break
		}
		seq += int64(n)
		count += n
		if seq < seg.last {
			break // budget spent within this segment
		}
	}
	return out, closed && seq == last, nil
}

// read appends to out the frames of up to limit records with Seq > after
// (which must lie in the segment), about maxBytes at most but at least one
// record, and returns how many it appended.
func (seg segment) read(after int64, limit, maxBytes int, out []byte) ([]byte, int, error) {
	k := (after + 1 - seg.first) / indexEvery
	off, cur := seg.index[k], seg.first+k*indexEvery
	var h [api.FrameHeaderSize]byte
	for ; cur <= after; cur++ {
		if _, err := seg.f.ReadAt(h[:], off); err != nil {
			return out, 0, fmt.Errorf("read log index: %w", err)
		}
		off += api.FrameHeaderSize + int64(binary.BigEndian.Uint32(h[17:21]))
	}
	buf := make([]byte, max(0, min(int64(maxBytes), seg.size-off)))
	if _, err := seg.f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return out, 0, fmt.Errorf("read log: %w", err)
	}
	end, count := 0, 0
	for count < limit && end+api.FrameHeaderSize <= len(buf) {
		l := api.FrameHeaderSize + int(binary.BigEndian.Uint32(buf[end+17:end+21]))
		if end+l > len(buf) {
			break
		}
		end += l
		count++
	}
	if count == 0 && len(out) == 0 {
		// The next record is larger than maxBytes: return it alone.
		if _, err := seg.f.ReadAt(h[:], off); err != nil {
			return out, 0, fmt.Errorf("read log: %w", err)
		}
		buf = make([]byte, api.FrameHeaderSize+int(binary.BigEndian.Uint32(h[17:21])))
		if _, err := seg.f.ReadAt(buf, off); err != nil {
			return out, 0, fmt.Errorf("read log: %w", err)
		}
		end, count = len(buf), 1
	}
	return append(out, buf[:end]...), count, nil
}

// seqAt returns the seq of the last record read before t (or the one before
// the oldest kept), so that reading after it yields the records read at or
// after t.
func (s *logStore) seqAt(t time.Time) (int64, error) {
	s.dropMu.RLock()
	defer s.dropMu.RUnlock()
	s.mu.Lock()
	segs := make([]segment, len(s.segs))
	for i, seg := range s.segs {
		segs[i] = *seg
	}
	s.mu.Unlock()
	tn := t.UnixNano()
	var h [api.FrameHeaderSize]byte
	for _, seg := range segs {
		r := bufio.NewReaderSize(io.NewSectionReader(seg.f, 0, seg.size), 64<<10)
		for seq := seg.first; seq <= seg.last; seq++ {
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
	}
	return segs[len(segs)-1].last, nil
}

// closeFiles closes every segment file.
func (s *logStore) closeFiles() error {
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, seg := range s.segs {
		errs = append(errs, seg.f.Close())
	}
	return errors.Join(errs...)
}
