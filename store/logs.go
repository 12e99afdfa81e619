package store

import (
	"context"
	"fmt"
	"time"

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

type logRow struct {
	bun.BaseModel `bun:"table:job_logs"`

	JobID  string    `bun:"job_id,pk"`
	Seq    int64     `bun:"seq,pk"`
	Time   time.Time `bun:"time,notnull"`
	Stream string    `bun:"stream,notnull"`
	Data   []byte    `bun:"data,notnull"`
}

type logState struct {
	bun.BaseModel `bun:"table:job_log_state"`

	JobID   string `bun:"job_id,pk"`
	LastSeq int64  `bun:"last_seq,notnull"`
	Bytes   int64  `bun:"bytes,notnull"`
}

// logChunkBytes bounds one INSERT statement of log rows.
const logChunkBytes = 512 << 10

// AppendLogs appends lines to a job's log in one transaction, numbering them
// after the job's last line. The lines that fit in the job's byte quota are
// written; if any did not fit it returns ErrLogQuota (with the count written).
// It returns the sequence number of the last line written.
func (s *Store) AppendLogs(ctx context.Context, jobID string, lines []LogLine) (int64, error) {
	if len(lines) == 0 {
		return 0, nil
	}
	var last int64
	var dropped int
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
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
		rows := make([]logRow, 0, min(len(lines), 4096))
		seq, bytes := st.LastSeq, st.Bytes
		chunk := 0
		flush := func() error {
			if len(rows) == 0 {
				return nil
			}
			_, err := tx.NewInsert().Model(&rows).Exec(ctx)
			rows, chunk = rows[:0], 0
			return err
		}
		for i, l := range lines {
			if bytes+int64(len(l.Data)) > s.logQuota {
				dropped = len(lines) - i
				break
			}
			seq++
			bytes += int64(len(l.Data))
			t := l.Time
			if t.IsZero() {
				t = s.Now()
			}
			rows = append(rows, logRow{JobID: jobID, Seq: seq, Time: t.UTC(), Stream: l.Stream, Data: nonNil(l.Data)})
			chunk += len(l.Data) + 64
			if chunk >= logChunkBytes || len(rows) >= 4096 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		last = seq
		_, err := tx.NewUpdate().Model((*logState)(nil)).
			Set("last_seq = ?", seq).Set("bytes = ?", bytes).
			Where("job_id = ?", jobID).Exec(ctx)
		return err
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

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ReadLogs returns up to limit lines of a job's log with Seq > afterSeq, in
// order (1000 lines when limit is zero). Pass the last Seq read to continue.
func (s *Store) ReadLogs(ctx context.Context, jobID string, afterSeq int64, limit int) ([]LogLine, error) {
	var rows []logRow
	err := s.db.NewSelect().Model(&rows).
		Where("job_id = ? AND seq > ?", jobID, afterSeq).
		OrderExpr("seq").Limit(limitOr(limit, 1000)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("read logs of job %s: %w", jobID, err)
	}
	lines := make([]LogLine, len(rows))
	for i, r := range rows {
		lines[i] = LogLine{Seq: r.Seq, Time: r.Time.UTC(), Stream: r.Stream, Data: r.Data}
	}
	return lines, nil
}

// LogSize returns the number of bytes stored for a job's log and its last Seq.
func (s *Store) LogSize(ctx context.Context, jobID string) (bytes, lastSeq int64, err error) {
	var st logState
	err = s.db.NewSelect().Model(&st).Where("job_id = ?", jobID).Scan(ctx)
	if err != nil {
		if e := notFound(err, ""); isNotFound(e) {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("log size of job %s: %w", jobID, err)
	}
	return st.Bytes, st.LastSeq, nil
}

// DeleteLogs removes a job's log.
func (s *Store) DeleteLogs(ctx context.Context, jobID string) error {
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewDelete().Model((*logRow)(nil)).Where("job_id = ?", jobID).Exec(ctx); err != nil {
			return fmt.Errorf("delete logs of job %s: %w", jobID, err)
		}
		if _, err := tx.NewDelete().Model((*logState)(nil)).Where("job_id = ?", jobID).Exec(ctx); err != nil {
			return fmt.Errorf("delete logs of job %s: %w", jobID, err)
		}
		return nil
	})
}
