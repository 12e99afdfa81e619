package storeview

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"hoist/store"
	"hoist/web"
)

var _ web.Shared = (*View)(nil)

// CreateSession stores a login session (only its id's hash is kept).
func (v *View) CreateSession(ctx context.Context, id string, p web.Principal, csrf string, expires time.Time) error {
	return v.st.CreateSession(ctx, store.Session{ID: id, Principal: p.Name, Role: string(p.Role), CSRF: csrf, ExpiresAt: expires})
}

// GetSession returns a live session, or web.ErrNotFound.
func (v *View) GetSession(ctx context.Context, id string) (web.Principal, string, time.Time, error) {
	s, err := v.st.GetSession(ctx, id)
	if err != nil {
		return web.Principal{}, "", time.Time{}, mapErr(err)
	}
	return web.Principal{Name: s.Principal, Role: web.Role(s.Role)}, s.CSRF, s.ExpiresAt, nil
}

// DeleteSession ends a session.
func (v *View) DeleteSession(ctx context.Context, id string) error {
	return v.st.DeleteSession(ctx, id)
}

// SeenDelivery records a webhook delivery's keys and reports a replay.
func (v *View) SeenDelivery(ctx context.Context, ttl time.Duration, keys ...string) (bool, error) {
	return v.st.SeenDelivery(ctx, ttl, keys...)
}

// PutPRPlan stores a pull request's plan as JSON.
func (v *View) PutPRPlan(ctx context.Context, pr web.PRPlan, sameHead bool) error {
	b, err := json.Marshal(pr)
	if err != nil {
		return fmt.Errorf("encode pr plan: %w", err)
	}
	return v.st.PutPRPlan(ctx, store.PRPlan{Provider: pr.Provider, Number: pr.Number, HeadSHA: pr.HeadSHA, Data: b, CommentID: pr.CommentID}, sameHead)
}

// GetPRPlan returns a pull request's plan with its comment id, or
// web.ErrNotFound.
func (v *View) GetPRPlan(ctx context.Context, provider string, number int) (web.PRPlan, error) {
	r, err := v.st.GetPRPlan(ctx, provider, number)
	if err != nil {
		return web.PRPlan{}, mapErr(err)
	}
	return decodePRPlan(r)
}

// SetPRPlanComment records the comment a pull request's plan was posted in.
func (v *View) SetPRPlanComment(ctx context.Context, provider string, number int, id int64) error {
	return v.st.SetPRPlanComment(ctx, provider, number, id)
}

// decodePRPlan decodes a stored plan; the row's comment id is the one
// that counts (the JSON's may predate it).
func decodePRPlan(r store.PRPlan) (web.PRPlan, error) {
	var pr web.PRPlan
	if err := json.Unmarshal(r.Data, &pr); err != nil {
		return web.PRPlan{}, fmt.Errorf("decode pr plan %s#%d: %w", r.Provider, r.Number, err)
	}
	pr.CommentID = r.CommentID
	return pr, nil
}

// DeletePRPlan drops a pull request's plan.
func (v *View) DeletePRPlan(ctx context.Context, provider string, number int) error {
	return v.st.DeletePRPlan(ctx, provider, number)
}

// ListPRPlans returns the stored plans, most recently updated first.
func (v *View) ListPRPlans(ctx context.Context) ([]web.PRPlan, error) {
	rows, err := v.st.ListPRPlans(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.PRPlan, 0, len(rows))
	for _, r := range rows {
		pr, err := decodePRPlan(r)
		if err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	return out, nil
}
