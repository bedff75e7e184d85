// Package scheduler is the stage scheduler of seeds/gost-scheduler.md:
// stages (Go code in the binary, or external services implementing the
// gRPC Stage) that react to offer changes and to timers, each with its own
// queue topic and a low-priority one for re-crawls, its private state kept
// in the offer aggregate beside the offer, and optimistic concurrency on
// the offer's version.
//
// The router reads offers.events and asks every stage not holding the offer
// in its queue whether to queue it (ENQUEUE) or wake it later (SET_TIMER);
// the aggregate queues an offer at most once per stage. A stage's workers
// read its queues, call Process with the stage's rate limit and parallelism
// and retries, and send the result (STAGE_RESULT); the aggregate saves it
// only if the offer is still at the version the stage read, and otherwise
// queues the stage again. The timer service keeps pending timers on disk and
// fires each into the stage's queue when due.
package scheduler

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/offerv1"
	"github.com/offerlog/offerlog/schemas/proto/stagev1"
)

// Should is a stage's answer to ShouldProcess: queue the offer now, or at
// TimerAt (Unix ms, 0: no timer).
type Should struct {
	Process bool
	TimerAt int64
}

// Result is a stage's Process result: an offer update (nil: none), the new
// state (nil: unchanged) and the timer (> 0 sets, -1 clears, 0 leaves).
type Result struct {
	Offer   *schemas.Offer
	State   *schemas.StageState
	TimerAt int64
}

// Stage is the stage API of the seed. Both methods must be pure: the
// scheduler calls them again whenever it needs to. They are called
// concurrently: Process by up to the stage's MaxParallelism workers of
// each process at once (different offers), ShouldProcess by the router's
// partitions at once, and the router's ShouldProcess of an offer may run
// while a worker's Process of the same offer does; an implementation must
// be safe for concurrent use (a gRPC stage is: each call is a request).
type Stage interface {
	ShouldProcess(ctx context.Context, o *schemas.Offer, version int64, st schemas.StageState) (Should, error)
	Process(ctx context.Context, o *schemas.Offer, version int64, st schemas.StageState) (Result, error)
}

// DefaultExpiryDays is how long an offer is exposed before it expires
// (gost-scheduler.md: "снятие объявления после 180 дней экспозиции").
const DefaultExpiryDays = 180

// Expiry is the built-in stage that moves an offer exposed for Days days
// to EXPIRED. Exposure is the time the offer was ACTIVE and not banned, as
// the aggregate keeps it (schemas.Offer.Exposure): an offer deactivated
// and reactivated keeps what it had left. It keeps no state; its timer is
// the moment the exposure runs out.
type Expiry struct{ Days int }

// due returns when o's exposure reaches Days, and whether it is exposed
// (an offer not exposed has no due time). now is the caller's clock.
func (e Expiry) due(o *schemas.Offer, now int64) (int64, bool) {
	days := e.Days
	if days <= 0 {
		days = DefaultExpiryDays
	}
	at := max(now, o.ExposedSince) // the same due time on a clock behind the log's
	ms, shown := o.Exposure(at)
	if o.Status != schemas.OfferActive || !shown {
		return 0, false
	}
	return at + int64(days)*24*time.Hour.Milliseconds() - ms, true
}

// ShouldProcess asks for a timer at the expiry of an active offer, or for
// processing once it is due. now is the caller's clock.
func (e Expiry) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, st schemas.StageState) (Should, error) {
	return e.should(o, st, time.Now()), nil
}

func (e Expiry) should(o *schemas.Offer, st schemas.StageState, now time.Time) Should {
	due, ok := e.due(o, now.UnixMilli())
	if !ok {
		return Should{}
	}
	if due <= now.UnixMilli() {
		return Should{Process: true}
	}
	if st.TimerAt == due {
		return Should{} // already set
	}
	return Should{TimerAt: due}
}

// Process expires the offer if it is active and due; otherwise it changes
// nothing (the stage is checked again on its next change).
func (e Expiry) Process(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (Result, error) {
	return e.process(o, time.Now()), nil
}

func (e Expiry) process(o *schemas.Offer, now time.Time) Result {
	if due, ok := e.due(o, now.UnixMilli()); !ok || due > now.UnixMilli() {
		return Result{}
	}
	next := *o
	next.Status = schemas.OfferExpired
	return Result{Offer: &next, TimerAt: -1}
}

// Remote is a stage served by an external service over gRPC.
type Remote struct {
	Name string
	conn *grpc.ClientConn
	cl   stagev1.StageClient
}

// DialRemote returns the stage name served at addr.
//
// Calls wait for the connection to be ready (up to their deadline) rather
// than fail at once while the service is away, and the connection is
// retried every 5 s at most (gRPC's default waits up to 2 minutes), so a
// service back after a minute is found within seconds.
func DialRemote(name, addr string) (*Remote, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 5 * time.Second,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}}))
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", name, err)
	}
	return &Remote{Name: name, conn: conn, cl: stagev1.NewStageClient(conn)}, nil
}

// Close closes the connection.
func (r *Remote) Close() error { return r.conn.Close() }

// Ready reports whether the connection to the service is up.
func (r *Remote) Ready() bool { return r.conn.GetState() == connectivity.Ready }

// Away reports whether err of a call to stage means the stage is away
// rather than failing: an external stage whose connection is not ready
// that could not be reached (or not before the call's deadline).
func Away(stage Stage, err error) bool {
	r, ok := stage.(interface{ Ready() bool })
	if !ok || r.Ready() {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

func request(stage string, o *schemas.Offer, version int64, st schemas.StageState) *stagev1.StageRequest {
	return &stagev1.StageRequest{Offer: offerv1.FromOffer(o), OfferVersion: version, Stage: stage,
		State: &stagev1.State{TypeUrl: st.TypeURL, Value: st.Value, Version: st.Version}}
}

// ShouldProcess asks the service.
func (r *Remote) ShouldProcess(ctx context.Context, o *schemas.Offer, version int64, st schemas.StageState) (Should, error) {
	resp, err := r.cl.ShouldProcess(ctx, request(r.Name, o, version, st))
	if err != nil {
		return Should{}, err
	}
	return Should{Process: resp.Process, TimerAt: resp.TimerAtMs}, nil
}

// Process asks the service.
func (r *Remote) Process(ctx context.Context, o *schemas.Offer, version int64, st schemas.StageState) (Result, error) {
	resp, err := r.cl.Process(ctx, request(r.Name, o, version, st))
	if err != nil {
		return Result{}, err
	}
	res := Result{TimerAt: resp.TimerAtMs}
	if resp.Offer != nil {
		res.Offer = offerv1.ToOffer(resp.Offer)
	}
	if resp.State != nil {
		res.State = &schemas.StageState{TypeURL: resp.State.TypeUrl, Value: resp.State.Value}
	}
	return res, nil
}

// Serve returns a gRPC Stage server of s, for services written in Go.
func Serve(s Stage) stagev1.StageServer { return &stageServer{s: s} }

type stageServer struct {
	stagev1.UnimplementedStageServer
	s Stage
}

func fromRequest(r *stagev1.StageRequest) (*schemas.Offer, schemas.StageState) {
	o := offerv1.ToOffer(r.Offer)
	if r.Offer != nil {
		o.ID, o.SellerID, o.ExternalID = r.Offer.Id, r.Offer.SellerId, r.Offer.ExternalId
		o.CreatedAt, o.UpdatedAt = time.UnixMilli(r.Offer.CreatedAtMs).UTC(), time.UnixMilli(r.Offer.UpdatedAtMs).UTC()
	}
	st := schemas.StageState{Stage: r.Stage}
	if r.State != nil {
		st.TypeURL, st.Value, st.Version = r.State.TypeUrl, r.State.Value, r.State.Version
	}
	return o, st
}

func (s *stageServer) ShouldProcess(ctx context.Context, r *stagev1.StageRequest) (*stagev1.ShouldProcessResponse, error) {
	o, st := fromRequest(r)
	d, err := s.s.ShouldProcess(ctx, o, r.OfferVersion, st)
	if err != nil {
		return nil, err
	}
	return &stagev1.ShouldProcessResponse{Process: d.Process, TimerAtMs: d.TimerAt}, nil
}

func (s *stageServer) Process(ctx context.Context, r *stagev1.StageRequest) (*stagev1.ProcessResponse, error) {
	o, st := fromRequest(r)
	res, err := s.s.Process(ctx, o, r.OfferVersion, st)
	if err != nil {
		return nil, err
	}
	out := &stagev1.ProcessResponse{TimerAtMs: res.TimerAt}
	if res.Offer != nil {
		out.Offer = offerv1.FromOffer(res.Offer)
	}
	if res.State != nil {
		out.State = &stagev1.State{TypeUrl: res.State.TypeURL, Value: res.State.Value}
	}
	return out, nil
}
