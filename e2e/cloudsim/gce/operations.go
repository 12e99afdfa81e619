package gce

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/sim"
)

// An operation is a zonal or regional Operation
// (https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations).
// Its effect happened when it was created; the mutation's answer shows it
// PENDING and every later get DONE (with the error, if any), so that a
// client's Operation.Wait costs one poll and no back-off sleep.
type operation struct {
	scope    string // "zones/<z>" or "regions/<r>"
	created  time.Time
	polled   bool
	pb       *computepb.Operation
	failure  *computepb.Error
	httpCode int32
	httpMsg  string
}

// scopeGlobal is the scope of global operations (firewalls).
const scopeGlobal = "global"

func scopeZone(zone string) string     { return "zones/" + zone }
func scopeRegion(region string) string { return "regions/" + region }

// newOp records an operation on target and returns it as first answered.
func (p *Provider) newOp(s *sim.Sim, scope, opType, target, targetID string, failure *opFailure) *computepb.Operation {
	now := s.Now()
	id, _ := strconv.ParseUint(p.newID(), 10, 64)
	name := fmt.Sprintf("operation-%d-%x", now.UnixMilli(), id)
	pb := &computepb.Operation{
		Kind:              proto.String("compute#operation"),
		Id:                proto.Uint64(id),
		Name:              proto.String(name),
		OperationType:     proto.String(opType),
		TargetLink:        proto.String(target),
		User:              proto.String(saEmail),
		InsertTime:        proto.String(timestamp(now)),
		CreationTimestamp: proto.String(timestamp(now)),
		SelfLink:          proto.String(linkBase + "/" + scope + "/operations/" + name),
		Progress:          proto.Int32(0),
	}
	if targetID != "" {
		tid, _ := strconv.ParseUint(targetID, 10, 64)
		pb.TargetId = proto.Uint64(tid)
	}
	if z, ok := strings.CutPrefix(scope, "zones/"); ok {
		pb.Zone = proto.String(zoneLink(z))
	} else if rg, ok := strings.CutPrefix(scope, "regions/"); ok {
		pb.Region = proto.String(regionLink(rg))
	}
	op := &operation{scope: scope, created: now, pb: pb}
	if failure != nil {
		op.failure = &computepb.Error{Errors: []*computepb.Errors{{
			Code: proto.String(failure.code), Message: proto.String(failure.message),
		}}}
		op.httpCode, op.httpMsg = failure.httpCode, failure.httpMsg
	}
	v := op.view(now)
	p.mu.Lock()
	p.ops[name] = op
	p.mu.Unlock()
	return v
}

// poll returns the operation as a get answers it.
func (o *operation) poll(now time.Time) *computepb.Operation {
	o.polled = true
	return o.view(now)
}

// An opFailure is how an operation ends when it fails.
type opFailure struct {
	code     string // e.g. ZONE_RESOURCE_POOL_EXHAUSTED
	message  string
	httpCode int32 // e.g. 503
	httpMsg  string
}

// view returns the operation as seen at now.
func (o *operation) view(now time.Time) *computepb.Operation {
	pb := proto.Clone(o.pb).(*computepb.Operation)
	if !o.polled {
		pb.Status = computepb.Operation_PENDING.Enum()
	} else {
		pb.Status = computepb.Operation_DONE.Enum()
		pb.StartTime = proto.String(timestamp(o.created))
		pb.EndTime = proto.String(timestamp(now))
		pb.Progress = proto.Int32(100)
		if o.failure != nil {
			pb.Error = o.failure
			pb.HttpErrorStatusCode = proto.Int32(o.httpCode)
			pb.HttpErrorMessage = proto.String(o.httpMsg)
		}
	}
	return pb
}

func (p *Provider) getOp(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	var scope string
	switch {
	case r.PathValue("zone") != "":
		scope = scopeZone(r.PathValue("zone"))
	case r.PathValue("region") != "":
		scope = scopeRegion(r.PathValue("region"))
	default:
		scope = scopeGlobal
	}
	name := r.PathValue("op")
	p.mu.Lock()
	defer p.mu.Unlock()
	op, ok := p.ops[name]
	if !ok || op.scope != scope {
		return nil, notFound("projects/" + Project + "/" + scope + "/operations/" + name)
	}
	return op.poll(s.Now()), nil
}

// opForRequest returns the operation an earlier call with requestId
// started, so that a retried mutation is not done twice
// (https://cloud.google.com/compute/docs/api/how-tos/api-requests-responses#request_id).
func (p *Provider) opForRequest(s *sim.Sim, requestID string) (*computepb.Operation, bool) {
	if requestID == "" {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	name, ok := p.requests[requestID]
	if !ok {
		return nil, false
	}
	return p.ops[name].view(s.Now()), true
}

// mutation serves a call that starts an operation: it checks the
// request's requestId, answers a retried call with the operation the first
// one started (opForRequest), else runs do and remembers the operation do
// started for that requestId.
func (p *Provider) mutation(do func(s *sim.Sim, r *http.Request, requestID string) (*computepb.Operation, *apiError)) func(*sim.Sim, *http.Request) (proto.Message, *apiError) {
	return func(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
		rid, e := requestID(r)
		if e != nil {
			return nil, e
		}
		if op, ok := p.opForRequest(s, rid); ok {
			return op, nil
		}
		op, e := do(s, r, rid)
		if e != nil {
			return nil, e
		}
		if rid != "" {
			p.mu.Lock()
			p.requests[rid] = op.GetName()
			p.mu.Unlock()
		}
		return op, nil
	}
}

// requestID returns the request's requestId, checked to be a UUID as
// Compute Engine requires.
func requestID(r *http.Request) (string, *apiError) {
	id := r.URL.Query().Get("requestId")
	if id != "" && (!requestIDRE.MatchString(id) || id == "00000000-0000-0000-0000-000000000000") {
		return "", badRequest("invalid", fmt.Sprintf("Invalid value for field 'requestId': '%s'. The request ID must be a valid UUID with the exception that zero UUID is not supported (00000000-0000-0000-0000-000000000000).", id))
	}
	return id, nil
}
