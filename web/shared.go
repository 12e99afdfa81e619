package web

import (
	"context"
	"time"
)

// Shared keeps the web state every hoist server on one database must agree
// on: login sessions (a browser logged in through one server is logged in
// on all), webhook deliveries already processed (a replay reaching another
// server is still a replay) and pull-request plans (every server's history
// page shows them). storeview.View implements it over the store; without it
// the server keeps them in its own memory.
type Shared interface {
	// CreateSession stores a login session under its cookie value id.
	CreateSession(ctx context.Context, id string, p Principal, csrf string, expires time.Time) error
	// GetSession returns the live session with cookie value id, or
	// ErrNotFound.
	GetSession(ctx context.Context, id string) (p Principal, csrf string, expires time.Time, err error)
	// DeleteSession ends a session; absent is success.
	DeleteSession(ctx context.Context, id string) error
	// SeenDelivery records a delivery's keys for ttl and reports whether
	// one was already recorded (a replay), atomically across servers.
	SeenDelivery(ctx context.Context, ttl time.Duration, keys ...string) (bool, error)
	// PutPRPlan stores a pull request's plan; with sameHead only while the
	// stored plan is for pr.HeadSHA.
	PutPRPlan(ctx context.Context, pr PRPlan, sameHead bool) error
	// GetPRPlan returns a pull request's stored plan with the id of the
	// comment it was posted in (PRPlan.CommentID), or ErrNotFound.
	GetPRPlan(ctx context.Context, provider string, number int) (PRPlan, error)
	// SetPRPlanComment records the id of the comment a pull request's plan
	// was posted in; later PutPRPlan calls keep it.
	SetPRPlanComment(ctx context.Context, provider string, number int, id int64) error
	// DeletePRPlan drops a pull request's plan.
	DeletePRPlan(ctx context.Context, provider string, number int) error
	// ListPRPlans returns the plans, most recently updated first.
	ListPRPlans(ctx context.Context) ([]PRPlan, error)
}

// sharedTimeout bounds one call to Shared made on behalf of a request.
const sharedTimeout = 5 * time.Second

func sharedCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), sharedTimeout)
}
