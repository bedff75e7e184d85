package numerator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// SealerGroup is the consumer group of the sealer on numerator.generations.
const SealerGroup = "numerator-sealer"

// SealerConfig configures the sealer.
type SealerConfig struct {
	// Kafka is the cluster it reads and writes.
	Kafka *streams.Cluster
	// Cluster names the Kafka cluster in the state pointer, by its seed
	// brokers ("host:port,..."): a master of another cluster that finds the
	// pointer newer than its own last state reads the state from there.
	Cluster string
	// View is a running view of the numerator table.
	View *table.View
	// Coordinator holds the write lock and the state pointer.
	Coordinator coordinator.Coordinator
	// Holder names this master; LockTimeout bounds one build; RetryEvery
	// is how often a refused master asks again.
	Holder      string
	LockTimeout time.Duration
	RetryEvery  time.Duration
	// Type is T of the state version; Scheme the sharding scheme of a state
	// that has none yet.
	Type   int64
	Scheme int64
	// TTL is how many generations a key may go unseen before its id is
	// freed; RebuildShare the share of holes in a shard that triggers a
	// rebuild (0: never automatically).
	TTL          int64
	RebuildShare float64
	// EntryBudget is how many table entries a seal holds in memory at
	// most (0: DefaultEntryBudget); a table of more is read in several
	// passes, one per group of shards that fits.
	EntryBudget int
	// HandoverTimeout is how long the handover of another data centre's
	// state may fail before that state is declared invalid (0:
	// DefaultHandoverTimeout).
	HandoverTimeout time.Duration
	// CoordinatorWait bounds every call to the coordinator (0: 30 s): a
	// call that gets no answer fails, saying what it waited for, and the
	// marker is tried again.
	CoordinatorWait time.Duration
	// Hook, if set, is called at each point of a marker's handling, with
	// the ticket of the lock: tests pause a master there.
	Hook    func(ctx context.Context, at Point, ticket int64)
	Metrics *Metrics
	Logger  *slog.Logger
}

// RunSealer reads the markers of numerator.generations through the one
// consume loop and carries them out one by one: seal a generation, rebuild,
// reshard. Each is decided from the numerator table once the numerator
// group has applied everything written before the decision (end offsets
// listed at that moment), under the coordinator's write lock: the decisions
// go to numerator.results, then the new state, naming the marker it carries
// out, to numerator.states; an invalid marker goes to numerator.dead with
// the reason. The marker's offset is committed after that. It returns when
// ctx ends.
//
// A marker delivered again (a crash after the state was written but before
// the offset was committed) finds its own offset in the last state and
// changes nothing. A seal that crashed before its state was written is
// carried out again from the table: decisions already applied are kept (a
// plan gives every remaining key the id it gave it the first time), so the
// ids are the same.
func RunSealer(ctx context.Context, cfg SealerConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, err := sharding.Get(cfg.Scheme); err != nil {
		return err
	}
	if cfg.RetryEvery <= 0 {
		cfg.RetryEvery = 5 * time.Second
	}
	if cfg.CoordinatorWait <= 0 {
		cfg.CoordinatorWait = 30 * time.Second
	}
	if cfg.HandoverTimeout <= 0 {
		cfg.HandoverTimeout = DefaultHandoverTimeout
	}
	cl, err := cfg.Kafka.Producer("numerator-sealer", kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return fmt.Errorf("sealer: %w", err)
	}
	defer cl.Close()
	s := &sealer{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}
	var loopMetrics *streams.LoopMetrics
	if cfg.Metrics != nil {
		loopMetrics = cfg.Metrics.Loop
	}
	return streams.RunLoop(ctx, streams.LoopConfig{Name: SealerGroup, Cluster: cfg.Kafka, Group: SealerGroup,
		Topics: []string{topics.NumeratorGenerations}, DeadTopic: topics.NumeratorDead, Producer: cl,
		// A marker is retried until it is carried out: a seal must not be
		// skipped because ZooKeeper or the broker was away for a while.
		Backoff: streams.Backoff{Initial: min(cfg.RetryEvery, time.Second), Max: cfg.RetryEvery},
		// Markers of older releases were written in transactions.
		ClientOptions: []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())},
		Metrics:       loopMetrics, Logger: cfg.Logger, Handler: s.handle})
}

// TransactionalID is the transactional id of the masters' builds on a
// cluster, or the prefix of those ids (TransactionalIDOf).
const TransactionalID = "offerlog-numerator-sealer"

// Point is a point of a marker's handling (SealerConfig.Hook).
type Point string

// The points of a marker's handling.
const (
	Locked   Point = "locked"   // the write lock taken, nothing fenced yet
	Fenced   Point = "fenced"   // the builds before fenced, this one's client made
	Built    Point = "built"    // the build written, not reported
	Reported Point = "reported" // the report accepted, the build not committed
)

// hook calls the Hook, if any.
func (s *sealer) hook(ctx context.Context, at Point, ticket int64) {
	if s.cfg.Hook != nil {
		s.cfg.Hook(ctx, at, ticket)
	}
}

// FenceWindow bounds how many tickets before its own a master fences
// (fence): a master further back is refused any report, and its open
// build is aborted by the broker at the transaction's timeout.
const FenceWindow = 32

// TransactionalIDOf returns the transactional id of the build under
// ticket: with a coordinator whose tickets outlive its process
// (ZooKeeper), one id a ticket, TransactionalID-<ticket>, so that Kafka's
// fencing follows the tickets' order: a master that resumes late, its lock
// long taken over, fences only its own id, never the build of the ticket
// after it. With one whose tickets start again with the process (Local:
// one process, one master) it is TransactionalID itself, which a restarted
// process's first build fences. (Until 2026-11-27 it was one id a master,
// "offerlog-numerator-sealer-<holder>"; until 0.5.0 TransactionalID for
// every master of a cluster: a stale master resuming aborted the current
// holder's build.)
func TransactionalIDOf(c coordinator.Coordinator, ticket int64) string {
	if !c.DurableTickets() {
		return TransactionalID
	}
	return fmt.Sprintf("%s-%d", TransactionalID, ticket)
}

type sealer struct {
	cfg SealerConfig
	cl  *kgo.Client // dead letters, adopted states, invalid records
	tx  *kgo.Client // the builds of the marker being handled, in transactions
	adm *kadm.Client
	// failing is the handover that has been failing (adopt).
	failing handover
}

// fence makes the transactional client of one marker's builds, taken
// under lock, once the builds of the tickets after accepted (the ticket of
// the last accepted report, which the pointer names) and before lock's are
// fenced: each of them, killed or cut off from the lock, has its open
// transaction aborted, and can never commit (its report is refused: the
// lock is another's). (The numerator group reads committed records only and
// stops before such a transaction on numerator.results; every build waits
// for that group first (caughtUp), and would wait until the broker aborted
// it at its timeout, the lock's: 10 minutes by default.) A build whose
// report was accepted is never aborted by another master: it commits, or
// is aborted at its timeout. A master that lost the lock finds its own
// client fenced, or its report refused; its next marker makes a new one.
func (s *sealer) fence(ctx context.Context, lock coordinator.Lock, accepted int64) (*kgo.Client, error) {
	timeout := s.txTimeout()
	id := TransactionalIDOf(s.cfg.Coordinator, lock.Ticket)
	if id != TransactionalID {
		// The builds before, and a build of a release before 0.5.0 (one
		// id for every master, fenced then by every next master, reported
		// or not), left open by a master upgraded since.
		ids := []string{TransactionalID}
		for t := max(accepted+1, lock.Ticket-FenceWindow, 1); t < lock.Ticket; t++ {
			ids = append(ids, TransactionalIDOf(s.cfg.Coordinator, t))
		}
		for _, before := range ids {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &before, int32(timeout.Milliseconds()), -1, -1
			resp, err := req.RequestWith(ctx, s.cl)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err != nil {
				return nil, fmt.Errorf("fence the build of %s: %w", before, err)
			}
		}
	}
	// A build's decisions and state are one transaction, committed only
	// once the coordinator accepted its report: the numerator group and
	// every reader of numerator.states read committed records only, so a
	// build refused (its lock timed out or was taken over) leaves nothing.
	tx, err := s.cfg.Kafka.Transactional("numerator-sealer-tx", id, kgo.ProducerLinger(2*time.Millisecond), kgo.TransactionTimeout(timeout))
	if err != nil {
		return nil, err
	}
	if _, _, err := tx.ProducerID(ctx); err != nil {
		tx.Close()
		return nil, fmt.Errorf("fence the master before: %w", err)
	}
	return tx, nil
}

// txTimeout is a build's transaction's timeout: the lock's, within
// [1 m, 15 m].
func (s *sealer) txTimeout() time.Duration {
	return min(max(s.cfg.LockTimeout, time.Minute), 15*time.Minute)
}

// coordinated calls fn with a context that ends after CoordinatorWait:
// every wait on the coordinator has a deadline.
func (s *sealer) coordinated(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CoordinatorWait)
	defer cancel()
	return fn(ctx)
}

// handle carries out one marker under the write lock.
func (s *sealer) handle(ctx context.Context, r *kgo.Record) error {
	var m schemas.GenerationMarker
	if err := schemas.GenerationMarkers.Decode(r.Value, &m); err != nil {
		return streams.Permanentf("undecodable marker: %v", err)
	}
	var lock coordinator.Lock
	err := s.coordinated(ctx, func(ctx context.Context) (err error) {
		lock, err = s.cfg.Coordinator.Acquire(ctx, s.cfg.Holder, s.cfg.LockTimeout)
		return err
	})
	if errors.Is(err, coordinator.ErrLocked) {
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.LockRefused.Inc()
		}
		s.cfg.Logger.Info("sealer: the write lock is held, waiting", "err", err, "retry every", s.cfg.RetryEvery)
		lock, err = coordinator.AcquireRetry(ctx, s.cfg.Coordinator, s.cfg.Holder, s.cfg.LockTimeout, s.cfg.RetryEvery, s.cfg.CoordinatorWait)
	}
	if err != nil {
		return fmt.Errorf("take the write lock: %w", err)
	}
	reported := false
	var p coordinator.Pointer
	err = s.coordinated(ctx, func(ctx context.Context) (err error) {
		p, _, err = s.cfg.Coordinator.State(ctx)
		return err
	})
	if err == nil {
		s.hook(ctx, Locked, lock.Ticket)
		if s.tx, err = s.fence(ctx, lock, p.Ticket); err == nil {
			s.hook(ctx, Fenced, lock.Ticket)
		}
	} else {
		err = fmt.Errorf("read the state pointer: %w", err)
	}
	defer func() {
		if s.tx != nil {
			s.tx.Close()
			s.tx = nil
		}
		if reported {
			return
		}
		// Nothing was built (a marker carried out already, an invalid
		// one, a failure): free the lock for the next master.
		err := s.coordinated(ctx, func(ctx context.Context) error { return s.cfg.Coordinator.Report(ctx, lock.Ticket, nil) })
		if err != nil {
			s.cfg.Logger.Warn("sealer: the lock is not freed; it times out", "ticket", lock.Ticket, "after", s.cfg.LockTimeout, "err", err)
		}
	}()
	if err != nil {
		return err
	}
	_, reported, err = s.carryOut(ctx, r, &m, lock, p)
	if errors.Is(err, errDeclared) {
		// The pointer is back at this cluster's state: carry the marker
		// out from it, under a new lock.
		s.tx.Close()
		s.tx = nil
		return s.handle(ctx, r)
	}
	return err
}

// current returns the last valid state written that decodes (nil if
// none), its version, or the empty version, and its offset on
// numerator.states (-1: none). A record of numerator.states that does not
// decode is passed over (and logged): it cannot be a state this sealer
// wrote, and must not stop it. So is a state that a later invalid record
// names (its version and ticket: declared invalid, adopt).
func (s *sealer) current(ctx context.Context) (*schemas.NumeratorState, Version, int64, error) {
	empty := Version{T: s.cfg.Type, S: s.cfg.Scheme}
	ends, err := streams.EndOffsets(ctx, s.adm, topics.NumeratorStates)
	if err != nil {
		return nil, empty, -1, err
	}
	end := ends[0]
	if end == 0 {
		return nil, empty, -1, nil
	}
	// The last states are at the end; read back further only when none of
	// the last ones decodes.
	type found struct {
		st *schemas.NumeratorState
		v  Version
		at int64
	}
	for back := int64(20); ; back *= 4 {
		from := max(0, end-back)
		var valid []found
		invalid := map[string]bool{}
		err := streams.ReadRange(ctx, s.cfg.Kafka, topics.NumeratorStates, map[int32]int64{0: from}, map[int32]int64{0: end}, func(r *kgo.Record) {
			var st schemas.NumeratorState
			if err := schemas.NumeratorStates.Decode(r.Value, &st); err != nil {
				s.cfg.Logger.Warn("sealer: undecodable state passed over", "offset", r.Offset, "err", err)
				return
			}
			if st.Invalid != "" {
				invalid[fmt.Sprint(st.Version, "/", st.Ticket)] = true
				return // a refused build's record, or an invalidation: no state
			}
			pv, err := ParseVersion(st.Version)
			if err != nil {
				s.cfg.Logger.Warn("sealer: state with a bad version passed over", "offset", r.Offset, "version", st.Version)
				return
			}
			valid = append(valid, found{&st, pv, r.Offset})
		})
		if err != nil {
			return nil, empty, -1, err
		}
		for i := len(valid) - 1; i >= 0; i-- {
			if f := valid[i]; !invalid[fmt.Sprint(f.st.Version, "/", f.st.Ticket)] {
				return f.st, f.v, f.at, nil
			}
		}
		if from == 0 {
			return nil, empty, -1, nil
		}
	}
}

// carryOut decides the marker m of record r (under lock; p is the state
// pointer read under it) and writes its decisions and
// state in one transaction, reports the state to the coordinator and, once
// the report is accepted, commits. It returns the new state and whether it
// reported; nil for a marker already carried out, or a permanent error for
// an invalid one. A refused report aborts the transaction (no decision
// applied, no state) and writes a record saying the build was invalid.
func (s *sealer) carryOut(ctx context.Context, r *kgo.Record, m *schemas.GenerationMarker, lock coordinator.Lock, p coordinator.Pointer) (*schemas.NumeratorState, bool, error) {
	cur, v, at, err := s.current(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the current state: %w", err)
	}
	adopted, err := s.adopt(ctx, p, cur, v, at, lock)
	if errors.Is(err, errDeclared) {
		return nil, true, err // the pointer moved back, the lock freed
	} else if err != nil {
		return nil, false, err
	} else if adopted {
		if cur, v, _, err = s.current(ctx); err != nil {
			return nil, false, fmt.Errorf("read the adopted state: %w", err)
		}
	}
	if cur != nil && cur.MarkerPartition == r.Partition && cur.MarkerOffset >= r.Offset {
		s.cfg.Logger.Info("sealer: marker already carried out", "offset", r.Offset, "version", cur.Version)
		return nil, false, nil
	}
	dead := func(format string, args ...any) (*schemas.NumeratorState, bool, error) {
		return nil, false, streams.Permanentf(format, args...)
	}
	next := v
	scheme, _ := sharding.Get(v.S)
	// gen is the operator's generation the build counts in (a seal's; the
	// last sealed one for a rebuild or reshard). G is the seed's: it grows
	// when a seal adds doc_ids, whatever the generation's number.
	var gen, lastReuse int64
	if cur != nil {
		gen, lastReuse = cur.Generation, cur.LastReuse
	}
	switch m.Action {
	case schemas.MarkerSeal:
		if m.Generation <= gen {
			return dead("generation %d is not after the sealed generation %d", m.Generation, gen)
		}
		gen = m.Generation
	case schemas.MarkerRebuild:
		next.V++
	case schemas.MarkerReshard:
		sch, err := sharding.Get(m.Scheme)
		if err != nil {
			return dead("%v", err)
		}
		scheme, next.S, next.V = sch, m.Scheme, next.V+1
	default:
		return dead("unknown action %q", m.Action)
	}
	if err := s.caughtUp(ctx); err != nil {
		return nil, false, err
	}
	// As many shards' entries in memory at a time as fit in the budget:
	// one pass over the table for all of them when it is small enough.
	var readErr error
	loader := &shardLoader{budget: s.cfg.EntryBudget, read: func(lo, hi int, keep func(int) (bool, int)) (map[int][]Entry, error) {
		return s.entries(gen, scheme, lo, hi, keep)
	}}
	plan := PlanShards(scheme, *m, gen, s.cfg.TTL, s.cfg.RebuildShare, func(shard int) []Entry {
		es, err := loader.shard(shard, scheme.Shards)
		if err != nil && readErr == nil {
			readErr = err
		}
		return es
	})
	if readErr != nil {
		return nil, false, readErr
	}
	if m.Action == schemas.MarkerSeal && plan.Seen == 0 {
		return dead("generation %d is unknown: no offer was seen in it", m.Generation)
	}
	if plan.Rebuilt && m.Action == schemas.MarkerSeal {
		next.V++
	}
	if plan.New > 0 {
		next.G++
	}
	if reuses(cur, &plan, next.V == v.V && next.S == v.S) {
		lastReuse = next.G
	}
	next = pastInvalid(next, p.Invalidated)
	st := &schemas.NumeratorState{Version: next.String(), Generation: gen, LastReuse: lastReuse, Scheme: next.S, Rebuilt: plan.Rebuilt,
		Shards: plan.Shards, Holder: lock.Holder, Ticket: lock.Ticket, MarkerPartition: r.Partition, MarkerOffset: r.Offset,
		SealedAt: time.Now().UTC().Truncate(time.Millisecond)}
	written, err := s.write(ctx, plan.Assignments, st, next)
	if err != nil {
		return nil, false, err
	}
	s.hook(ctx, Built, lock.Ticket)
	// The pointer names the state record: the read up to the offset after
	// it finds it (the transaction's marker comes after).
	pointer := &coordinator.Pointer{Version: st.Version, Cluster: s.cfg.Cluster, Topic: topics.NumeratorStates,
		Offsets: map[int32]int64{written.Partition: written.Offset + 1}, Invalidated: p.CarryOn()}
	err = s.coordinated(ctx, func(ctx context.Context) error { return s.cfg.Coordinator.Report(ctx, lock.Ticket, pointer) })
	if err != nil && !errors.Is(err, coordinator.ErrStaleTicket) && !errors.Is(err, coordinator.ErrTimedOut) {
		// No answer: the coordinator may have taken the report and its
		// answer been lost. Aborting then would leave the pointer naming
		// a state that is not on the log: ask the pointer what happened.
		if taken, rerr := s.reportTaken(ctx, lock.Ticket, st.Version); rerr == nil && taken {
			s.cfg.Logger.Info("sealer: the report's answer was lost, the pointer names the build: committing it",
				"version", st.Version, "ticket", lock.Ticket, "err", err)
			err = nil
		} else if rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		s.end(ctx, kgo.TryAbort)
		refused := errors.Is(err, coordinator.ErrStaleTicket) || errors.Is(err, coordinator.ErrTimedOut)
		if refused {
			s.invalid(ctx, st, err)
		}
		// A refused master tries again (numerator.md); an unanswered
		// report too: its state is not valid until reported.
		return nil, refused, fmt.Errorf("the build of %s under ticket %d is not valid: %w", st.Version, lock.Ticket, err)
	}
	s.hook(ctx, Reported, lock.Ticket)
	// The report was accepted: the pointer names this build, which is
	// committed even if the marker's partition was lost meanwhile (the
	// handler's context ended in a rebalance, or while this master was
	// stopped): no other master fences it, and leaving it open would
	// keep the pointer naming a state that is not on the log until the
	// broker aborted it at its timeout.
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.txTimeout())
	defer cancel()
	if err := s.end(commitCtx, kgo.TryCommit); err != nil {
		// Reported, not committed: the pointer names a state that is
		// not on the log. The marker is carried out again, to the same
		// plan, and reported again.
		return nil, true, fmt.Errorf("commit the build of %s: %w", st.Version, err)
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Seals.With(string(m.Action)).Inc()
	}
	s.cfg.Logger.Info("numerator state written", "action", m.Action, "version", st.Version, "changes", len(plan.Assignments))
	return st, true, nil
}

// reportTaken asks the coordinator, until it answers (within the lock's
// timeout), whether the pointer names version under ticket: the report
// whose answer was lost was taken.
func (s *sealer) reportTaken(ctx context.Context, ticket int64, version string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LockTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		var p coordinator.Pointer
		var ok bool
		err := s.coordinated(ctx, func(ctx context.Context) (err error) {
			p, ok, err = s.cfg.Coordinator.State(ctx)
			return err
		})
		if err == nil {
			return ok && p.Ticket == ticket && p.Version == version, nil
		}
		s.cfg.Logger.Warn("sealer: the coordinator does not say whether it took the report; asking again", "err", err)
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("whether the report of ticket %d was taken: %w", ticket, err)
		case <-time.After(streams.DefaultBackoff.Wait(attempt)):
		}
	}
}

// write begins a transaction and writes the decisions, then the state, to
// it; it returns the state's record. The decisions are encoded as they are
// written: the producer's buffer (its MaxBufferedRecords) bounds what is
// held, not the generation's size.
func (s *sealer) write(ctx context.Context, as []Planned, st *schemas.NumeratorState, next Version) (*kgo.Record, error) {
	if err := s.tx.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("begin the build's transaction: %w", err)
	}
	fail := func(err error) (*kgo.Record, error) {
		s.end(ctx, kgo.TryAbort)
		return nil, err
	}
	var mu sync.Mutex
	var writeErr error
	for _, a := range as {
		out := &schemas.Assignment{BusinessID: int64(a.Key.BusinessID), OfferID: a.Key.OfferID, ShopID: int64(a.Key.ShopID),
			WarehouseID: int64(a.Key.WarehouseID), Shard: int32(a.Shard), DocID: a.DocID, Version: st.Version, Generation: st.Generation}
		data, err := schemas.Assignments.Encode(out)
		if err != nil {
			return fail(err)
		}
		s.tx.Produce(ctx, &kgo.Record{Topic: topics.NumeratorResults, Key: []byte(a.Key.String()), Value: data}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				writeErr = cmp.Or(writeErr, err)
				mu.Unlock()
			}
		})
	}
	data, err := schemas.NumeratorStates.Encode(st)
	if err != nil {
		return fail(err)
	}
	rec := &kgo.Record{Topic: topics.NumeratorStates, Key: []byte(fmt.Sprint(next.T)), Value: data}
	if err := s.tx.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fail(fmt.Errorf("write the state: %w", err))
	}
	if err := s.tx.Flush(ctx); err != nil {
		return fail(fmt.Errorf("write the decisions: %w", err))
	}
	if writeErr != nil {
		return fail(fmt.Errorf("write the decisions: %w", writeErr))
	}
	return rec, nil
}

// end ends the open transaction (commit or abort).
func (s *sealer) end(ctx context.Context, how kgo.TransactionEndTry) error {
	if how == kgo.TryAbort {
		// franz-go ends a transaction only with nothing buffered.
		if err := s.tx.AbortBufferedRecords(ctx); err != nil {
			s.cfg.Logger.Warn("sealer: drop the build's buffered records", "err", err)
		}
	}
	err := s.tx.EndTransaction(ctx, how)
	if err != nil && how == kgo.TryAbort {
		s.cfg.Logger.Warn("sealer: abort the build's transaction (the broker aborts it at its timeout)", "err", err)
	}
	return err
}

// invalid records that the build of st was refused (numerator.states;
// it is no state). It is written outside the build's transaction, which
// was aborted and may have been fenced.
func (s *sealer) invalid(ctx context.Context, st *schemas.NumeratorState, why error) {
	bad := *st
	bad.Invalid = why.Error()
	s.cfg.Logger.Warn("sealer: the build was refused and left nothing", "version", st.Version, "ticket", st.Ticket, "err", why)
	if err := s.record(ctx, &bad); err != nil {
		s.cfg.Logger.Warn("sealer: the invalid build is not recorded", "err", err)
	}
}

// reuses notes in plan's shard summaries the largest doc_id given since
// the shard's last renumbering (HighDocID), and reports whether the plan
// gives a new key an id at or below the one of the state before it, cur:
// an id another key held. same says whether the plan keeps cur's
// numbering (no rebuild, no reshard).
func reuses(cur *schemas.NumeratorState, plan *StatePlan, same bool) bool {
	high := map[int]int64{}
	if cur != nil && same {
		for _, sh := range cur.Shards {
			high[int(sh.Shard)] = max(sh.HighDocID, sh.MaxDocID)
		}
	}
	reused := false
	for _, a := range plan.Assignments {
		if h, ok := high[a.Shard]; ok && a.DocID != NoDocID && a.DocID <= h {
			reused = true
		}
	}
	for i := range plan.Shards {
		sh := &plan.Shards[i]
		sh.HighDocID = sh.MaxDocID
		if h, ok := high[int(sh.Shard)]; ok {
			sh.HighDocID = max(h, sh.MaxDocID)
		}
	}
	return reused
}

// newer reports whether state version a comes after b: versions move on by
// V (rebuilds, reshards) and G (seals).
func newer(a, b Version) bool { return a.V > b.V || (a.V == b.V && a.G > b.G) }

// caughtUp waits until the numerator group has applied every offer and
// result written so far and the view holds the table that results.
func (s *sealer) caughtUp(ctx context.Context) error {
	ends, err := s.adm.ListEndOffsets(ctx, topics.NumeratorOffers, topics.NumeratorResults)
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	if err := streams.WaitCommitted(ctx, s.adm, Group, ends.Offsets()); err != nil {
		return fmt.Errorf("wait for the numerator group: %w", err)
	}
	table, err := s.adm.ListEndOffsets(ctx, string(Table))
	if err != nil {
		return fmt.Errorf("end offsets of the table: %w", err)
	}
	want := map[int32]int64{}
	table.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	return s.cfg.View.WaitFor(ctx, want)
}

// SeenAsOf returns the last generation up to g that e was seen in, as far
// as the entry tells: offers of a later generation, applied before the seal
// of g read the table, must not make g lose the key (0: not seen by g).
func SeenAsOf(e *schemas.NumeratorEntry, g int64) int64 {
	switch {
	case e.LastSeen <= g:
		return e.LastSeen
	case e.SeenBefore <= g:
		return e.SeenBefore
	}
	return 0
}

// DefaultEntryBudget is how many table entries a seal holds in memory at
// most (SealerConfig.EntryBudget): about 100 bytes each, so about 100 MiB.
const DefaultEntryBudget = 1 << 20

// shardLoader hands out the shards' entries, reading the table once for as
// many consecutive shards as fit in budget entries.
type shardLoader struct {
	budget int
	// read returns the entries of shards lo to hi-1 that keep accepts,
	// by shard. keep may refuse more as the pass goes: it also returns a
	// shard whose entries read so far are to be dropped (-1: none).
	read   func(lo, hi int, keep func(shard int) (bool, int)) (map[int][]Entry, error)
	cached map[int][]Entry
}

// shard returns shard i's entries (of n shards), from a pass that read it
// with as many shards after it as fit in the budget: the first shard whose
// entries would go beyond it is dropped, with every shard after it, as the
// pass goes (shard i is always kept).
func (l *shardLoader) shard(i, n int) ([]Entry, error) {
	if es, ok := l.cached[i]; ok {
		delete(l.cached, i)
		return es, nil
	}
	budget := l.budget
	if budget <= 0 {
		budget = DefaultEntryBudget
	}
	limit, held := n, 0
	counts := map[int]int{}
	got, err := l.read(i, n, func(shard int) (bool, int) {
		if shard >= limit {
			return false, -1
		}
		counts[shard]++
		if held++; held > budget && shard > i {
			// Drop the last shard taken: no shard after it was.
			last := shard
			for s := range counts {
				last = max(last, s)
			}
			held -= counts[last]
			delete(counts, last)
			limit = last
			return shard < last, last
		}
		return true, -1
	})
	if err != nil {
		return nil, err
	}
	l.cached = map[int][]Entry{}
	for s, es := range got {
		if s != i && s < limit {
			l.cached[s] = es
		}
	}
	return got[i], nil
}

// entries reads the entries of shards lo to hi-1 of the table that keep
// accepts, from the view, each shard's in key order, each entry as seen up
// to generation g (SeenAsOf).
func (s *sealer) entries(g int64, scheme sharding.Scheme, lo, hi int, keep func(shard int) (bool, int)) (map[int][]Entry, error) {
	it, err := s.cfg.View.Iterator()
	if err != nil {
		return nil, fmt.Errorf("iterate the table: %w", err)
	}
	defer it.Release()
	out := map[int][]Entry{}
	for it.Next() {
		// The table is keyed by the offer's key (the group refuses a value
		// naming another offer), so an entry of a shard not read is passed
		// over without decoding it.
		if k, err := sharding.ParseKey(it.Key()); err == nil {
			if sh := scheme.Shard(k); sh < lo || sh >= hi {
				continue
			}
		}
		v, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", it.Key(), err)
		}
		e, ok := v.(*schemas.NumeratorEntry)
		if !ok || e == nil {
			continue
		}
		k := sharding.Key{BusinessID: uint64(e.BusinessID), OfferID: e.OfferID, ShopID: uint64(e.ShopID), WarehouseID: uint64(e.WarehouseID)}
		sh := scheme.Shard(k)
		if sh < lo || sh >= hi {
			continue
		}
		ok, drop := keep(sh)
		if drop >= 0 {
			delete(out, drop)
		}
		if !ok {
			continue
		}
		out[sh] = append(out[sh], Entry{Key: k, DocID: e.DocID, LastSeen: SeenAsOf(e, g), Shard: int(e.Shard)})
	}
	for sh, es := range out {
		slices.SortFunc(es, ByKey)
		out[sh] = es
	}
	return out, nil
}
