package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// GPUSample is one GPU's use in a MetricsPoint.
type GPUSample struct {
	// Index is the device index.
	Index int `json:"index"`
	// MemoryUsedBytes is the device memory in use.
	MemoryUsedBytes int64 `json:"memory_used_bytes"`
	// UtilPercent is the GPU utilization in percent.
	UtilPercent float64 `json:"util_percent"`
}

// MetricsPoint is one sample of a job's resource use, as its runner read it
// from the container's cgroup and nvidia-smi, amd-smi or rocm-smi.
type MetricsPoint struct {
	bun.BaseModel `bun:"table:job_metrics_points,alias:mp"`

	// JobID is the job sampled.
	JobID string `bun:"job_id,pk"`
	// Time is when the runner took the sample.
	Time time.Time `bun:"collected_at,pk"`
	// CPUUsageMicros is the CPU time the container consumed so far.
	CPUUsageMicros int64 `bun:"cpu_usage_micros,notnull"`
	// MemoryUsageBytes is the memory in use, page cache included.
	MemoryUsageBytes int64 `bun:"memory_usage_bytes,notnull"`
	// MemoryWorkingSetBytes is the memory in use less inactive file cache.
	MemoryWorkingSetBytes int64 `bun:"memory_working_set_bytes,notnull"`
	// MemoryLimitBytes is the container's memory limit; 0 when it has none.
	MemoryLimitBytes int64 `bun:"memory_limit_bytes,notnull"`
	// GPUs is each GPU's use; empty on a host without GPUs.
	GPUs []GPUSample `bun:"gpus,type:text,notnull"`
}

// AddMetricsPoint records a sample of a job and deletes that job's samples
// taken before keepAfter, so each job keeps a bounded window.
func (s *Store) AddMetricsPoint(ctx context.Context, p MetricsPoint, keepAfter time.Time) error {
	p.Time = p.Time.UTC()
	if p.GPUs == nil {
		p.GPUs = []GPUSample{}
	}
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&p).On("CONFLICT DO NOTHING").Exec(ctx); err != nil {
			return fmt.Errorf("add metrics point of job %s: %w", p.JobID, err)
		}
		if _, err := tx.NewDelete().Model((*MetricsPoint)(nil)).
			Where("job_id = ? AND collected_at < ?", p.JobID, keepAfter.UTC()).Exec(ctx); err != nil {
			return fmt.Errorf("trim metrics of job %s: %w", p.JobID, err)
		}
		return nil
	})
}

// MetricsPoints returns a job's samples taken at or after after, oldest
// first.
func (s *Store) MetricsPoints(ctx context.Context, jobID string, after time.Time) ([]MetricsPoint, error) {
	var ps []MetricsPoint
	err := s.db.NewSelect().Model(&ps).
		Where("job_id = ? AND collected_at >= ?", jobID, after.UTC()).
		Order("collected_at ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics of job %s: %w", jobID, err)
	}
	return ps, nil
}

// JobMetricsPoint is a MetricsPoint with the names of its run and job.
type JobMetricsPoint struct {
	MetricsPoint `bun:",extend"`

	// RunName is the job's run.
	RunName string `bun:"run_name,scanonly"`
	// JobName is the job's name.
	JobName string `bun:"job_name,scanonly"`
}

// LatestMetricsPoints returns the newest sample of every job that has one
// and is not finished (for the /metrics gauges).
func (s *Store) LatestMetricsPoints(ctx context.Context) ([]JobMetricsPoint, error) {
	var ps []JobMetricsPoint
	latest := s.db.NewSelect().Model((*MetricsPoint)(nil)).
		ColumnExpr("job_id, MAX(collected_at) AS collected_at").Group("job_id")
	err := s.db.NewSelect().Model(&ps).ColumnExpr("mp.*").ColumnExpr("j.run_name, j.job_name").
		Join("JOIN (?) AS latest ON latest.job_id = mp.job_id AND latest.collected_at = mp.collected_at", latest).
		Join("JOIN jobs AS j ON j.id = mp.job_id").
		Where("j.finished_at IS NULL").
		Order("j.run_name", "j.job_name").
		Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("latest metrics: %w", err)
	}
	return ps, nil
}

// PruneMetrics deletes the samples of every job that finished before
// before and returns how many samples went.
func (s *Store) PruneMetrics(ctx context.Context, before time.Time) (int64, error) {
	old := s.db.NewSelect().Model((*Job)(nil)).Column("id").
		Where("finished_at IS NOT NULL AND finished_at < ?", before.UTC())
	res, err := s.db.NewDelete().Model((*MetricsPoint)(nil)).Where("job_id IN (?)", old).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune metrics: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
