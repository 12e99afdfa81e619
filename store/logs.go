package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/uptrace/bun"
)

// LogLine is one chunk of a job's output.
type LogLine struct {
	// Seq orders a job's lines; the store assigns it (1, 2, 3, …) in AppendLogs.
	Seq int64
	// Time is when the line was produced (UTC).
	Time time.Time
	// Stream is "stdout" or "stderr" (or another producer-chosen name).
	Stream string
	// Data is the raw bytes, not necessarily UTF-8 or newline-terminated.
	Data []byte
}

// logChunk stores consecutive lines of one job (first_seq..last_seq) in one
// row: writing and reading a row per line is far too slow for busy jobs. Data
// is one format byte (chunkRaw or chunkS2) and then, raw or S2-compressed, a
// sequence of records, each: varint unix-nanosecond time, uvarint stream
// length, stream, uvarint data length, data.
type logChunk struct {
	bun.BaseModel `bun:"table:job_log_chunks"`

	JobID     string    `bun:"job_id,pk"`
	FirstSeq  int64     `bun:"first_seq,pk"`
	LastSeq   int64     `bun:"last_seq,notnull"`
	Lines     int       `bun:"lines,notnull"`
	Bytes     int64     `bun:"bytes,notnull"`
	FirstTime time.Time `bun:"first_time,notnull"`
	LastTime  time.Time `bun:"last_time,notnull"`
	Data      []byte    `bun:"data,notnull"`
}

type logState struct {
	bun.BaseModel `bun:"table:job_log_state"`

	JobID   string `bun:"job_id,pk"`
	LastSeq int64  `bun:"last_seq,notnull"`
	Bytes   int64  `bun:"bytes,notnull"`
	// QuotaExceeded stays set once a line was dropped: later lines are
	// refused too, so the stored log never has holes.
	QuotaExceeded bool `bun:"quota_exceeded,notnull"`
}

// logChunkBytes bounds the encoded (uncompressed) size of one chunk row.
const logChunkBytes = 256 << 10

// Chunk data formats (the first byte of logChunk.Data).
const (
	chunkRaw byte = 0
	chunkS2  byte = 1
)

// sealChunk compresses a chunk's records when that saves space; logs usually
// shrink several times, which is what makes bulk writes fast on Postgres.
func sealChunk(records []byte) []byte {
	out := make([]byte, 1, 1+s2.MaxEncodedLen(len(records)))
	out[0] = chunkS2
	out = append(out, s2.Encode(out[1:cap(out)], records)...)
	if len(out) >= len(records)+1 {
		return append([]byte{chunkRaw}, records...)
	}
	return out
}

func openChunk(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return nil, errCorruptLog
	}
	switch data[0] {
	case chunkRaw:
		return data[1:], nil
	case chunkS2:
		b, err := s2.Decode(nil, data[1:])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorruptLog, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: unknown format %d", errCorruptLog, data[0])
}

// AppendLogs appends lines to a job's log in one transaction, numbering them
// after the job's last line (a zero Time becomes now). The lines that fit in
// the job's byte quota (Options.LogQuota, counting Data bytes) are written; if
// any did not fit it returns ErrLogQuota along with the last Seq written, and
// every later append to the job returns ErrLogQuota without writing.
// It returns the Seq of the last line written.
func (s *Store) AppendLogs(ctx context.Context, jobID string, lines []LogLine) (int64, error) {
	if len(lines) == 0 {
		_, last, err := s.LogSize(ctx, jobID)
		return last, err
	}
	now := s.Now()
	var last int64
	var dropped int
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		dropped = 0
		st := logState{JobID: jobID}
		if _, err := tx.NewInsert().Model(&st).On("CONFLICT (job_id) DO NOTHING").Exec(ctx); err != nil {
			return err
		}
		q := tx.NewSelect().Model(&st).WherePK()
		if s.dialect == DialectPostgres {
			q = q.For("UPDATE")
		}
		if err := q.Scan(ctx); err != nil {
			return err
		}
		var chunks []logChunk
		var cur *logChunk
		seq, total := st.LastSeq, st.Bytes
		for i, l := range lines {
			if st.QuotaExceeded || total+int64(len(l.Data)) > s.logQuota {
				dropped = len(lines) - i
				break
			}
			t := l.Time
			if t.IsZero() {
				t = now
			}
			t = t.UTC()
			if cur == nil || len(cur.Data) >= logChunkBytes {
				chunks = append(chunks, logChunk{JobID: jobID, FirstSeq: seq + 1, FirstTime: t,
					Data: make([]byte, 0, min(logChunkBytes+1024, 64+len(lines)*(24+len(l.Data))))})
				cur = &chunks[len(chunks)-1]
			}
			seq++
			total += int64(len(l.Data))
			cur.Data = appendLogRecord(cur.Data, t, l.Stream, l.Data)
			cur.LastSeq, cur.LastTime = seq, t
			cur.Lines++
			cur.Bytes += int64(len(l.Data))
		}
		if len(chunks) > 0 || (dropped > 0 && !st.QuotaExceeded) {
			for i := range chunks {
				chunks[i].Data = sealChunk(chunks[i].Data)
			}
			if len(chunks) > 0 {
				if _, err := tx.NewInsert().Model(&chunks).Exec(ctx); err != nil {
					return err
				}
			}
			if _, err := tx.NewUpdate().Model((*logState)(nil)).
				Set("last_seq = ?", seq).Set("bytes = ?", total).Set("quota_exceeded = ?", dropped > 0).
				Where("job_id = ?", jobID).Exec(ctx); err != nil {
				return err
			}
		}
		last = seq
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append logs of job %s: %w", jobID, err)
	}
	if dropped > 0 {
		return last, fmt.Errorf("append logs of job %s: %d of %d lines dropped (quota %d bytes): %w",
			jobID, dropped, len(lines), s.logQuota, ErrLogQuota)
	}
	return last, nil
}

func appendLogRecord(b []byte, t time.Time, stream string, data []byte) []byte {
	b = binary.AppendVarint(b, t.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(stream)))
	b = append(b, stream...)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

var errCorruptLog = errors.New("corrupt log chunk")

// decodeLogChunk appends the lines of c with Seq > after to out, stopping at
// limit lines in out.
func decodeLogChunk(out []LogLine, c logChunk, after int64, limit int) ([]LogLine, error) {
	b, err := openChunk(c.Data)
	if err != nil {
		return out, err
	}
	streams := map[string]string{}
	for seq := c.FirstSeq; seq <= c.LastSeq; seq++ {
		ns, n := binary.Varint(b)
		if n <= 0 {
			return out, errCorruptLog
		}
		b = b[n:]
		sl, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < sl {
			return out, errCorruptLog
		}
		sb := b[n : n+int(sl)]
		b = b[n+int(sl):]
		dl, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < dl {
			return out, errCorruptLog
		}
		data := b[n : n+int(dl) : n+int(dl)]
		b = b[n+int(dl):]
		if seq <= after {
			continue
		}
		stream, ok := streams[string(sb)]
		if !ok {
			stream = string(sb)
			streams[stream] = stream
		}
		out = append(out, LogLine{Seq: seq, Time: time.Unix(0, ns).UTC(), Stream: stream, Data: data})
		if len(out) >= limit {
			break
		}
	}
	return out, nil
}

// ReadLogs returns up to limit lines of a job's log with Seq > afterSeq, in
// order (1000 lines when limit is zero). Pass the last Seq read to continue.
func (s *Store) ReadLogs(ctx context.Context, jobID string, afterSeq int64, limit int) ([]LogLine, error) {
	if limit <= 0 {
		limit = 1000
	}
	var out []LogLine
	after := afterSeq
	for len(out) < limit {
		var chunks []logChunk
		err := s.db.NewSelect().Model(&chunks).
			Where("job_id = ? AND last_seq > ?", jobID, after).
			OrderExpr("first_seq").Limit(8).Scan(ctx)
		if err != nil {
			return nil, fmt.Errorf("read logs of job %s: %w", jobID, err)
		}
		if len(chunks) == 0 {
			break
		}
		if out == nil {
			out = make([]LogLine, 0, min(limit, 8*chunks[0].Lines+16))
		}
		for _, c := range chunks {
			if out, err = decodeLogChunk(out, c, after, limit); err != nil {
				return nil, fmt.Errorf("read logs of job %s (seq %d-%d): %w", jobID, c.FirstSeq, c.LastSeq, err)
			}
			if len(out) >= limit {
				break
			}
			after = c.LastSeq
		}
	}
	return out, nil
}

// LogSize returns the number of Data bytes stored for a job's log and its
// last Seq (zeros for a job without logs).
func (s *Store) LogSize(ctx context.Context, jobID string) (bytes, lastSeq int64, err error) {
	var st logState
	err = s.db.NewSelect().Model(&st).Where("job_id = ?", jobID).Scan(ctx)
	if isNoRows(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("log size of job %s: %w", jobID, err)
	}
	return st.Bytes, st.LastSeq, nil
}

// PruneLogs deletes the logs of every job that finished before before and
// returns how many jobs lost their log. Logs of running jobs are kept
// whatever their age.
func (s *Store) PruneLogs(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		old := tx.NewSelect().Model((*Job)(nil)).Column("id").
			Where("finished_at IS NOT NULL AND finished_at < ?", before.UTC())
		if _, err := tx.NewDelete().Model((*logChunk)(nil)).Where("job_id IN (?)", old).Exec(ctx); err != nil {
			return fmt.Errorf("prune logs: %w", err)
		}
		res, err := tx.NewDelete().Model((*logState)(nil)).Where("job_id IN (?)", old).Exec(ctx)
		if err != nil {
			return fmt.Errorf("prune logs: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}
