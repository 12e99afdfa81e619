package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// This file holds the state several hoist servers sharing one database must
// agree on, which a single server once kept in memory: confirmations of held
// plans, probe counters, webhook deliveries, login sessions and pull-request
// plans. Rows that expire are deleted by PruneExpired.

// ConfirmationTTL is how long a confirmation of a revision's held plan
// stays valid.
const ConfirmationTTL = 30 * 24 * time.Hour

type confirmationRow struct {
	bun.BaseModel `bun:"table:plan_confirmations"`

	Project   string    `bun:"project,pk"`
	Revision  string    `bun:"revision,pk"`
	CreatedAt time.Time `bun:"created_at,notnull"`
	ExpiresAt time.Time `bun:"expires_at,notnull"`
}

// ConfirmRevision records that a user confirmed the held plan of revision
// sha in project proj; confirming twice is a no-op.
func (s *Store) ConfirmRevision(ctx context.Context, proj, sha string) error {
	if sha == "" {
		return fmt.Errorf("confirm revision: %w", errEmptyName)
	}
	now := s.Now()
	row := confirmationRow{Project: project(proj), Revision: sha, CreatedAt: now, ExpiresAt: now.Add(ConfirmationTTL)}
	if _, err := s.db.NewInsert().Model(&row).On("CONFLICT (project, revision) DO UPDATE").
		Set("expires_at = EXCLUDED.expires_at").Exec(ctx); err != nil {
		return fmt.Errorf("confirm revision %s: %w", sha, err)
	}
	return nil
}

// RevisionConfirmed reports whether a user confirmed the held plan of
// revision sha in project proj (and the confirmation has not expired).
func (s *Store) RevisionConfirmed(ctx context.Context, proj, sha string) (bool, error) {
	n, err := s.db.NewSelect().Model((*confirmationRow)(nil)).
		Where("project = ? AND revision = ? AND expires_at > ?", project(proj), sha, s.Now()).Count(ctx)
	if err != nil {
		return false, fmt.Errorf("revision confirmed %s: %w", sha, err)
	}
	return n > 0, nil
}

type probeCounterRow struct {
	bun.BaseModel `bun:"table:probe_counters"`

	JobID     string    `bun:"job_id,pk"`
	Probe     int       `bun:"probe,pk"`
	Passes    int       `bun:"passes,notnull"`
	UpdatedAt time.Time `bun:"updated_at,notnull"`
}

// RecordProbe records one result of probe number probe of a job and
// returns how many times in a row it has now passed (0 after a failure).
// The count is updated in one statement, so servers probing the same job
// never lose an update.
func (s *Store) RecordProbe(ctx context.Context, jobID string, probe int, ok bool) (int, error) {
	row := probeCounterRow{JobID: jobID, Probe: probe, UpdatedAt: s.Now()}
	q := s.db.NewInsert().Model(&row).On("CONFLICT (job_id, probe) DO UPDATE").
		Set("updated_at = EXCLUDED.updated_at")
	if ok {
		row.Passes = 1
		q = q.Set("passes = ?TableAlias.passes + 1")
	} else {
		q = q.Set("passes = 0")
	}
	var passes int
	if err := q.Returning("passes").Scan(ctx, &passes); err != nil {
		return 0, fmt.Errorf("record probe %s/%d: %w", jobID, probe, err)
	}
	return passes, nil
}

// A ProbeCounter is where one probe of a job stands, as RecordProbe
// counted it.
type ProbeCounter struct {
	// JobID and Probe (its index in the spec's probes) name the probe.
	JobID string
	Probe int
	// Passes is how many times in a row it passed; 0 after a failure.
	Passes int
	// UpdatedAt is when it was last recorded.
	UpdatedAt time.Time
}

// ListProbeCounters returns the probe counters of the given jobs, by job
// and then probe; a job never probed has none.
func (s *Store) ListProbeCounters(ctx context.Context, jobIDs ...string) ([]ProbeCounter, error) {
	if len(jobIDs) == 0 {
		return nil, nil
	}
	var rows []probeCounterRow
	if err := s.db.NewSelect().Model(&rows).Where("job_id IN (?)", bun.In(jobIDs)).
		OrderExpr("job_id, probe").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list probe counters: %w", err)
	}
	out := make([]ProbeCounter, len(rows))
	for i, r := range rows {
		out[i] = ProbeCounter{JobID: r.JobID, Probe: r.Probe, Passes: r.Passes, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}

// DeleteProbeCounters drops the probe counters of a job (it finished).
func (s *Store) DeleteProbeCounters(ctx context.Context, jobID string) error {
	if _, err := s.db.NewDelete().Model((*probeCounterRow)(nil)).Where("job_id = ?", jobID).Exec(ctx); err != nil {
		return fmt.Errorf("delete probe counters %s: %w", jobID, err)
	}
	return nil
}

type deliveryRow struct {
	bun.BaseModel `bun:"table:webhook_deliveries"`

	Key       string    `bun:"key,pk"`
	CreatedAt time.Time `bun:"created_at,notnull"`
	ExpiresAt time.Time `bun:"expires_at,notnull"`
}

// SeenDelivery records the keys of one webhook delivery (its id, a digest
// of its body; empty keys are skipped) for ttl and reports whether any of
// them was recorded before and has not expired: the delivery is a replay.
// Recording is atomic, so of two servers receiving the same delivery at
// once exactly one processes it.
func (s *Store) SeenDelivery(ctx context.Context, ttl time.Duration, keys ...string) (bool, error) {
	now := s.Now()
	dup := false
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		dup = false
		for _, k := range keys {
			if k == "" {
				continue
			}
			row := deliveryRow{Key: k, CreatedAt: now, ExpiresAt: now.Add(ttl)}
			// An expired row is taken over; a live one stays and marks the
			// delivery as a replay.
			res, err := tx.NewInsert().Model(&row).On("CONFLICT (key) DO UPDATE").
				Set("created_at = EXCLUDED.created_at").
				Set("expires_at = EXCLUDED.expires_at").
				Where("?TableAlias.expires_at <= ?", now).
				Exec(ctx)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				dup = true
			}
		}
		if dup {
			return errDuplicate
		}
		return nil
	})
	if errors.Is(err, errDuplicate) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("record webhook delivery: %w", err)
	}
	return false, nil
}

// errDuplicate rolls back SeenDelivery's transaction when a key was known,
// so a replay records nothing.
var errDuplicate = errors.New("duplicate delivery")

// Session is one logged-in browser. Its ID is the cookie value; only its
// SHA-256 is stored.
type Session struct {
	// ID is the secret cookie value.
	ID string
	// Principal names the user (or "admin").
	Principal string
	// Role is the user's role.
	Role string
	// CSRF is the token every state-changing form must carry.
	CSRF string
	// ExpiresAt ends the session.
	ExpiresAt time.Time
}

type sessionRow struct {
	bun.BaseModel `bun:"table:web_sessions"`

	IDHash    string    `bun:"id_hash,pk"`
	Principal string    `bun:"principal,notnull"`
	Role      string    `bun:"role,notnull"`
	CSRF      string    `bun:"csrf,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
	ExpiresAt time.Time `bun:"expires_at,notnull"`
}

func sessionHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// CreateSession stores a login session.
func (s *Store) CreateSession(ctx context.Context, ses Session) error {
	if ses.ID == "" {
		return fmt.Errorf("create session: %w", errEmptyName)
	}
	row := sessionRow{IDHash: sessionHash(ses.ID), Principal: ses.Principal, Role: ses.Role, CSRF: ses.CSRF,
		CreatedAt: s.Now(), ExpiresAt: ses.ExpiresAt.UTC()}
	if _, err := s.db.NewInsert().Model(&row).Exec(ctx); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// GetSession returns the session whose cookie value is id, or ErrNotFound
// when there is none or it expired.
func (s *Store) GetSession(ctx context.Context, id string) (Session, error) {
	var row sessionRow
	err := s.db.NewSelect().Model(&row).Where("id_hash = ? AND expires_at > ?", sessionHash(id), s.Now()).Scan(ctx)
	if err != nil {
		return Session{}, notFound(err, "get session")
	}
	return Session{ID: id, Principal: row.Principal, Role: row.Role, CSRF: row.CSRF, ExpiresAt: row.ExpiresAt.UTC()}, nil
}

// DeleteSession ends the session whose cookie value is id (no error when
// absent).
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.db.NewDelete().Model((*sessionRow)(nil)).Where("id_hash = ?", sessionHash(id)).Exec(ctx); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// PRPlan is the latest plan of one pull (or merge) request, as the web
// server encodes it.
type PRPlan struct {
	// Provider is "github" or "gitlab".
	Provider string
	// Number is the pull request's number.
	Number int
	// HeadSHA is the commit the plan is for.
	HeadSHA string
	// Data is the web server's JSON of the plan.
	Data []byte
	// CommentID is the forge's id of the comment (or merge request note)
	// the plan was posted in; 0 when none was posted. PutPRPlan keeps the
	// stored id when it is 0, and SetPRPlanComment sets it.
	CommentID int64
	// UpdatedAt is when the plan was last written.
	UpdatedAt time.Time
}

type prPlanRow struct {
	bun.BaseModel `bun:"table:pr_plans"`

	Provider  string    `bun:"provider,pk"`
	Number    int       `bun:"number,pk"`
	HeadSHA   string    `bun:"head_sha,notnull"`
	Data      string    `bun:"data,notnull"`
	CommentID int64     `bun:"comment_id,notnull"`
	UpdatedAt time.Time `bun:"updated_at,notnull"`
}

// MaxPRPlans is how many pull-request plans are kept; PutPRPlan drops the
// least recently updated beyond it.
const MaxPRPlans = 100

// PutPRPlan stores p as the plan of its pull request. With sameHead it
// writes only while the stored plan is for p.HeadSHA (a plan that finished
// after a newer push does not replace the newer one's row).
func (s *Store) PutPRPlan(ctx context.Context, p PRPlan, sameHead bool) error {
	row := prPlanRow{Provider: p.Provider, Number: p.Number, HeadSHA: p.HeadSHA, Data: string(p.Data), CommentID: p.CommentID, UpdatedAt: s.Now()}
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if sameHead {
			cols := []string{"data", "updated_at"}
			if p.CommentID != 0 {
				cols = append(cols, "comment_id")
			}
			if _, err := tx.NewUpdate().Model(&row).Column(cols...).WherePK().
				Where("head_sha = ?", p.HeadSHA).Exec(ctx); err != nil {
				return fmt.Errorf("update pr plan %s#%d: %w", p.Provider, p.Number, err)
			}
			return nil
		}
		if _, err := tx.NewInsert().Model(&row).On("CONFLICT (provider, number) DO UPDATE").
			Set("head_sha = EXCLUDED.head_sha").Set("data = EXCLUDED.data").Set("updated_at = EXCLUDED.updated_at").
			// A new push keeps the comment the plan was posted in.
			Set("comment_id = CASE WHEN EXCLUDED.comment_id <> 0 THEN EXCLUDED.comment_id ELSE ?TableAlias.comment_id END").
			Exec(ctx); err != nil {
			return fmt.Errorf("put pr plan %s#%d: %w", p.Provider, p.Number, err)
		}
		keep := tx.NewSelect().Model((*prPlanRow)(nil)).Column("provider", "number").
			OrderExpr("updated_at DESC, provider, number").Limit(MaxPRPlans)
		if _, err := tx.NewDelete().Model((*prPlanRow)(nil)).
			Where("(provider, number) NOT IN (?)", keep).Exec(ctx); err != nil {
			return fmt.Errorf("trim pr plans: %w", err)
		}
		return nil
	})
}

// DeletePRPlan drops the plan of a pull request (it was closed).
func (s *Store) DeletePRPlan(ctx context.Context, provider string, number int) error {
	if _, err := s.db.NewDelete().Model((*prPlanRow)(nil)).
		Where("provider = ? AND number = ?", provider, number).Exec(ctx); err != nil {
		return fmt.Errorf("delete pr plan %s#%d: %w", provider, number, err)
	}
	return nil
}

// ListPRPlans returns the stored pull-request plans, most recently updated
// first.
func (s *Store) ListPRPlans(ctx context.Context) ([]PRPlan, error) {
	var rows []prPlanRow
	if err := s.db.NewSelect().Model(&rows).OrderExpr("updated_at DESC, provider, number").
		Limit(MaxPRPlans).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list pr plans: %w", err)
	}
	out := make([]PRPlan, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.plan())
	}
	return out, nil
}

func (r prPlanRow) plan() PRPlan {
	return PRPlan{Provider: r.Provider, Number: r.Number, HeadSHA: r.HeadSHA, Data: []byte(r.Data),
		CommentID: r.CommentID, UpdatedAt: r.UpdatedAt.UTC()}
}

// GetPRPlan returns the stored plan of a pull request, or ErrNotFound.
func (s *Store) GetPRPlan(ctx context.Context, provider string, number int) (PRPlan, error) {
	var r prPlanRow
	err := s.db.NewSelect().Model(&r).Where("provider = ? AND number = ?", provider, number).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return PRPlan{}, ErrNotFound
	}
	if err != nil {
		return PRPlan{}, fmt.Errorf("get pr plan %s#%d: %w", provider, number, err)
	}
	return r.plan(), nil
}

// SetPRPlanComment records the id of the comment (or note) a pull
// request's plan was posted in; a missing plan (the pull request was
// closed meanwhile) is no error.
func (s *Store) SetPRPlanComment(ctx context.Context, provider string, number int, id int64) error {
	if _, err := s.db.NewUpdate().Model((*prPlanRow)(nil)).Set("comment_id = ?", id).
		Where("provider = ? AND number = ?", provider, number).Exec(ctx); err != nil {
		return fmt.Errorf("set pr plan comment %s#%d: %w", provider, number, err)
	}
	return nil
}

// PruneExpired deletes expired confirmations, webhook deliveries and
// sessions, and the probe counters of jobs that no longer exist or
// finished, and returns how many rows it removed.
func (s *Store) PruneExpired(ctx context.Context) (int64, error) {
	now := s.Now()
	var total int64
	for _, m := range []any{(*confirmationRow)(nil), (*deliveryRow)(nil), (*sessionRow)(nil)} {
		res, err := s.db.NewDelete().Model(m).Where("expires_at <= ?", now).Exec(ctx)
		if err != nil {
			return total, fmt.Errorf("prune expired: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
	}
	live := s.db.NewSelect().Model((*Job)(nil)).Column("id").
		Where("status NOT IN (?)", bun.In([]string{JobTerminated, JobAborted, JobFailed, JobDone}))
	res, err := s.db.NewDelete().Model((*probeCounterRow)(nil)).Where("job_id NOT IN (?)", live).Exec(ctx)
	if err != nil {
		return total, fmt.Errorf("prune probe counters: %w", err)
	}
	n, _ := res.RowsAffected()
	return total + n, nil
}
