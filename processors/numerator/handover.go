package numerator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// adoptWait bounds every call an adoption makes to the other cluster.
const adoptWait = time.Minute

// DefaultHandoverTimeout is how long a master tries to adopt the state
// another data centre's master built before it declares that state invalid
// (SealerConfig.HandoverTimeout).
const DefaultHandoverTimeout = 10 * time.Minute

// errDeclared says that adopt declared the state the pointer named
// invalid and moved the pointer back, freeing the lock: the marker is
// carried out again, from this cluster's state.
var errDeclared = errors.New("the state the pointer named was declared invalid")

// handover is the adoption that has been failing, and since when.
type handover struct {
	version string
	ticket  int64
	since   time.Time
}

// adopt copies into this cluster the newest state, when the coordinator's
// pointer names one that a master wrote in another cluster after the last
// state here (a master of another data centre), so that the build that
// follows starts from it. A cluster is named by its seed brokers, so the
// pointer says where to read. It reports whether it copied anything.
//
// The copy comes from durable storage: the other cluster's
// numerator.assignments, compacted (every key's current assignment, however
// long ago it was decided), once that cluster's numerator group has applied
// every decision (else its assignments are not the state yet). The
// assignments of the versions after the local one go to numerator.results
// here; once the numerator group here applied them, the numbered keys of
// every shard are counted against the state's summary, and only a copy
// that matches is recorded as the state. A copy that does not match is made
// again whole (every assignment of the state, and no id for a key the
// state does not number).
//
// The seed: the master that built the last state must hand it over to the
// next, otherwise its data is declared invalid. A handover that has failed
// for HandoverTimeout (the cluster does not answer, refuses, or does not
// hold the state the pointer names: its master reported and died before
// committing) ends so (declare): the state is recorded invalid here, the
// pointer moved back to this cluster's last valid state, and the marker
// carried out from it (errDeclared). A master whose own state the pointer
// names invalid adopts the pointer's state whole, however its version
// compares; it never declares the other's invalid (its own data is the
// invalid one), and waits for it, or for an operator (offerlog numerator
// reset). p is the pointer, read under lock (a zero ticket: none).
func (s *sealer) adopt(ctx context.Context, p coordinator.Pointer, cur *schemas.NumeratorState, v Version, at int64, lock coordinator.Lock) (bool, error) {
	own := cur != nil && p.Invalidates(s.cfg.Cluster, cur.Version, cur.Ticket)
	if p.Ticket == 0 || (!own && (p.Cluster == "" || p.Cluster == s.cfg.Cluster || (cur != nil && cur.Ticket >= p.Ticket))) {
		s.failing = handover{}
		return false, nil
	}
	var pv Version
	if p.Cluster != "" {
		var err error
		if pv, err = ParseVersion(p.Version); err != nil || pv.T != v.T || (!own && newer(v, pv)) {
			return false, nil // not a state of this numerator's line, or older
		}
	}
	var curGen int64
	if cur != nil {
		curGen = cur.Generation
	}
	st, n, err := s.copyIn(ctx, p, v, pv, curGen, own)
	if err != nil {
		if ctx.Err() != nil || own {
			if own {
				err = fmt.Errorf("this cluster's state %s was declared invalid: it waits to adopt %s of %s: %w", cur.Version, p.Version, p.Cluster, err)
			}
			return false, err
		}
		return false, s.handoverFailed(ctx, p, cur, at, lock, err)
	}
	s.failing = handover{}
	if st == nil {
		return false, nil // not newer: the same version of no later generation
	}
	if own {
		s.invalidate(ctx, cur, fmt.Sprintf("declared invalid by %s: its master did not hand it over; adopted %s of %s instead", s.invalidBy(p, cur), p.Version, p.Cluster))
	}
	if p.Cluster == "" {
		// No state was before the invalid one: this cluster starts
		// again from the empty state, its ids cleared.
		st.Scheme, st.Holder, st.Ticket, st.SealedAt = v.S, p.Holder, p.Ticket, time.Now().UTC().Truncate(time.Millisecond)
	}
	// Its marker was a record of the other cluster: none here.
	st.MarkerPartition, st.MarkerOffset = -1, -1
	data, err := schemas.NumeratorStates.Encode(st)
	if err != nil {
		return false, err
	}
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: topics.NumeratorStates, Key: []byte(fmt.Sprint(v.T)), Value: data}).FirstErr(); err != nil {
		return false, fmt.Errorf("record the adopted state %s: %w", p.Version, err)
	}
	s.cfg.Logger.Info("sealer: adopted the newest state from another cluster", "cluster", p.Cluster,
		"version", st.Version, "decisions", n, "whole", own)
	return true, nil
}

// invalidBy names who declared cur invalid, from p's invalidations.
func (s *sealer) invalidBy(p coordinator.Pointer, cur *schemas.NumeratorState) string {
	for _, inv := range p.Invalidated {
		if inv.Cluster == s.cfg.Cluster && inv.Version == cur.Version && inv.Ticket == cur.Ticket {
			return inv.By + " (" + inv.Why + ")"
		}
	}
	return "the coordinator"
}

// handoverFailed notes that the handover of the state p names failed with
// err, and returns err saying how long it has; once it has for
// HandoverTimeout, it declares the state invalid and returns errDeclared.
func (s *sealer) handoverFailed(ctx context.Context, p coordinator.Pointer, cur *schemas.NumeratorState, at int64, lock coordinator.Lock, err error) error {
	now := time.Now()
	if s.failing.version != p.Version || s.failing.ticket != p.Ticket {
		s.failing = handover{version: p.Version, ticket: p.Ticket, since: now}
	}
	failed := now.Sub(s.failing.since)
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.HandoverFailing.Set(failed.Seconds())
	}
	err = fmt.Errorf("adopt the state %s of cluster %s (failing for %s of %s): %w", p.Version, p.Cluster,
		failed.Round(time.Second), s.cfg.HandoverTimeout, err)
	if failed < s.cfg.HandoverTimeout {
		return err
	}
	why := fmt.Sprintf("not handed over within %s: %v", s.cfg.HandoverTimeout, err)
	if derr := s.declare(ctx, p, cur, at, lock, why); derr != nil {
		return errors.Join(err, fmt.Errorf("declare it invalid: %w", derr))
	}
	s.failing = handover{}
	return errDeclared
}

// declare declares the state p names invalid, for why, under lock: a
// record on numerator.states here says so, and the pointer moves back to
// this cluster's last valid state cur (at its offset at; nil: the pointer
// names no state), carrying the invalidation on. Reporting frees the lock.
func (s *sealer) declare(ctx context.Context, p coordinator.Pointer, cur *schemas.NumeratorState, at int64, lock coordinator.Lock, why string) error {
	inv := p.Invalidation(why, s.cfg.Holder, time.Now())
	if err := s.record(ctx, invalidRecord(p, inv)); err != nil {
		return err
	}
	back := BackTo(p, cur, s.cfg.Cluster, at, inv)
	if err := s.coordinated(ctx, func(ctx context.Context) error { return s.cfg.Coordinator.Report(ctx, lock.Ticket, &back) }); err != nil {
		return fmt.Errorf("move the pointer back: %w", err)
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Invalidated.Inc()
		s.cfg.Metrics.HandoverFailing.Set(0)
	}
	s.cfg.Logger.Error("sealer: the state the pointer named is declared invalid; the pointer is back at this cluster's last valid state",
		"version", p.Version, "cluster", p.Cluster, "holder", p.Holder, "ticket", p.Ticket, "back to", back.Version, "why", why)
	return nil
}

// BackTo returns the pointer that replaces p once inv declared the state
// it names invalid: cur, the last valid state of cluster (its record at
// offset at of numerator.states), or no state when cur is nil; the
// invalidations of p carried on with inv.
func BackTo(p coordinator.Pointer, cur *schemas.NumeratorState, cluster string, at int64, inv coordinator.Invalidation) coordinator.Pointer {
	back := pointerTo(cur, cluster, at)
	back.Invalidated = p.CarryOn(inv)
	return back
}

// pointerTo returns the pointer to cur, a state of cluster at offset at of
// numerator.states (nil: no state).
func pointerTo(cur *schemas.NumeratorState, cluster string, at int64) coordinator.Pointer {
	if cur == nil {
		return coordinator.Pointer{}
	}
	return coordinator.Pointer{Version: cur.Version, Cluster: cluster, Topic: topics.NumeratorStates, Offsets: map[int32]int64{0: at + 1}}
}

// invalidRecord is the record of numerator.states saying that inv
// declared the state p names invalid.
func invalidRecord(p coordinator.Pointer, inv coordinator.Invalidation) *schemas.NumeratorState {
	bad := &schemas.NumeratorState{Version: p.Version, Holder: p.Holder, Ticket: p.Ticket, MarkerPartition: -1, MarkerOffset: -1,
		SealedAt: p.ReportedAt.UTC().Truncate(time.Millisecond),
		Invalid:  fmt.Sprintf("declared invalid by %s: the state of cluster %s: %s", inv.By, p.Cluster, inv.Why)}
	if pv, err := ParseVersion(p.Version); err == nil {
		bad.Scheme = pv.S
	}
	return bad
}

// invalidate records here that the state cur is invalid (a record of
// numerator.states naming its version and ticket: current and StateOf pass
// over the state then).
func (s *sealer) invalidate(ctx context.Context, cur *schemas.NumeratorState, why string) {
	bad := *cur
	bad.Invalid = why
	if err := s.record(ctx, &bad); err != nil {
		s.cfg.Logger.Warn("sealer: the invalid state is not recorded", "version", cur.Version, "err", err)
	}
}

// record writes an invalid record (key "invalid") to numerator.states.
func (s *sealer) record(ctx context.Context, st *schemas.NumeratorState) error {
	data, err := schemas.NumeratorStates.Encode(st)
	if err != nil {
		return err
	}
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: topics.NumeratorStates, Key: []byte("invalid"), Value: data}).FirstErr(); err != nil {
		return fmt.Errorf("record the invalid state %s: %w", st.Version, err)
	}
	return nil
}

// copyIn copies the state p names (version pv) from its cluster into
// this one, whose state is version v of generation gen: the assignments
// after v, or, whole, every one of the state and no id for a key it does
// not number (a pointer of no cluster: no id for any key). It returns the
// state copied (nil: not newer) and how many decisions it wrote.
func (s *sealer) copyIn(ctx context.Context, p coordinator.Pointer, v, pv Version, gen int64, whole bool) (*schemas.NumeratorState, int, error) {
	st, copies, err := s.readRemote(ctx, p, v, pv, gen, whole)
	if err != nil || st == nil {
		return nil, 0, err
	}
	if whole {
		clears, err := s.unnumbered(copies, st)
		if err != nil {
			return nil, 0, err
		}
		copies = append(copies, clears...)
	}
	if err := s.cl.ProduceSync(ctx, copies...).FirstErr(); err != nil {
		return nil, 0, fmt.Errorf("copy the decisions of state %s of %s: %w", p.Version, p.Cluster, err)
	}
	if err := s.caughtUp(ctx); err != nil {
		return nil, 0, err
	}
	if err := s.verify(st, whole); err != nil {
		if !whole {
			s.cfg.Logger.Warn("sealer: the copy of the decisions after this cluster's state does not match the state: copying it whole",
				"version", p.Version, "cluster", p.Cluster, "err", err)
			return s.copyIn(ctx, p, v, pv, gen, true)
		}
		return nil, 0, fmt.Errorf("the copy is incomplete, not adopted: %w", err)
	}
	return st, len(copies), nil
}

// unnumbered returns, for every key the table here numbers that copies
// (the whole state st) does not, a decision that takes its id away.
func (s *sealer) unnumbered(copies []*kgo.Record, st *schemas.NumeratorState) ([]*kgo.Record, error) {
	there := make(map[string]bool, len(copies))
	for _, r := range copies {
		there[string(r.Key)] = true
	}
	it, err := s.cfg.View.Iterator()
	if err != nil {
		return nil, fmt.Errorf("iterate the table: %w", err)
	}
	defer it.Release()
	var out []*kgo.Record
	for it.Next() {
		if there[it.Key()] {
			continue
		}
		v, err := it.Value()
		e, ok := v.(*schemas.NumeratorEntry)
		if err != nil || !ok || e == nil || e.DocID == NoDocID {
			continue
		}
		data, err := schemas.Assignments.Encode(&schemas.Assignment{BusinessID: e.BusinessID, OfferID: e.OfferID, ShopID: e.ShopID,
			WarehouseID: e.WarehouseID, Shard: e.Shard, DocID: NoDocID, Version: st.Version, Generation: st.Generation})
		if err != nil {
			return nil, err
		}
		out = append(out, &kgo.Record{Topic: topics.NumeratorResults, Key: []byte(it.Key()), Value: data})
	}
	return out, nil
}

// readRemote reads, from the cluster the pointer p names, the state it
// points to and the assignments after the local state (version v of
// generation gen) up to it, or, whole, every assignment of the state, as
// records for numerator.results here; each call has adoptWait to answer.
// A state that is not after the local one (the same version, of no later
// generation: G grows only with new doc_ids) is nil, unless whole. A
// pointer of no cluster names the empty state.
func (s *sealer) readRemote(ctx context.Context, p coordinator.Pointer, v, pv Version, gen int64, whole bool) (*schemas.NumeratorState, []*kgo.Record, error) {
	if p.Cluster == "" {
		return &schemas.NumeratorState{Version: Version{T: v.T, S: v.S}.String()}, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, adoptWait)
	defer cancel()
	unanswered := func(what string, err error) error {
		if errors.Is(err, kerr.SaslAuthenticationFailed) {
			return fmt.Errorf("%s: cluster %s refused this process's credentials for it: give them with --peer-kafka-config FILE "+
				"(its bootstrap.servers and its user): %w", what, p.Cluster, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: the cluster did not answer within %s: %w", what, adoptWait, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	remote := strings.Split(p.Cluster, ",")
	other, err := s.cfg.Kafka.Other(remote)
	if err != nil {
		return nil, nil, err
	}
	defer other.Close()
	adm := other.Admin()
	// The state the pointer names: the last record before its offsets.
	from := map[int32]int64{}
	for part, end := range p.Offsets {
		from[part] = max(0, end-1)
	}
	var st *schemas.NumeratorState
	err = streams.ReadRange(ctx, other, p.Topic, from, p.Offsets, func(r *kgo.Record) {
		var x schemas.NumeratorState
		if schemas.NumeratorStates.Decode(r.Value, &x) == nil && x.Version == p.Version && x.Invalid == "" {
			st = &x
		}
	})
	if err != nil {
		return nil, nil, unanswered("read the state", err)
	}
	if st == nil {
		return nil, nil, fmt.Errorf("the state the pointer names is not at %v of %s (its master reported it and did not commit it?)", p.Offsets, p.Topic)
	}
	if !whole && !newer(pv, v) && st.Generation <= gen {
		return nil, nil, nil
	}
	// Its decisions are in its numerator's assignments once its group
	// applied every one of them.
	ends, err := adm.ListEndOffsets(ctx, topics.NumeratorResults)
	if err != nil {
		return nil, nil, unanswered("end offsets of its decisions", err)
	}
	if err := streams.WaitCommitted(ctx, adm, Group, ends.Offsets()); err != nil {
		return nil, nil, unanswered("wait for its numerator group to apply the state's decisions", err)
	}
	var copies []*kgo.Record
	err = streams.ReadToEnd(ctx, other, topics.NumeratorAssignments, func(r *kgo.Record) {
		var a schemas.Assignment
		if r.Value == nil || schemas.Assignments.Decode(r.Value, &a) != nil {
			return
		}
		if av, err := ParseVersion(a.Version); err == nil && !newer(av, pv) && a.Generation <= st.Generation &&
			(whole || newer(av, v) || a.Generation > gen) {
			copies = append(copies, &kgo.Record{Topic: topics.NumeratorResults, Key: r.Key, Value: r.Value})
		}
	})
	if err != nil {
		return nil, nil, unanswered("read its assignments", err)
	}
	return st, copies, nil
}

// verify checks that the table here numbers, in every shard, as many keys
// as the state st says, none past its largest doc_id; whole, also that
// it numbers no key in a shard st does not list.
func (s *sealer) verify(st *schemas.NumeratorState, whole bool) error {
	live := map[int32]int64{}
	maxID := map[int32]int64{}
	it, err := s.cfg.View.Iterator()
	if err != nil {
		return fmt.Errorf("iterate the table: %w", err)
	}
	defer it.Release()
	for it.Next() {
		v, err := it.Value()
		e, ok := v.(*schemas.NumeratorEntry)
		if err != nil || !ok || e == nil || e.DocID == NoDocID {
			continue
		}
		live[e.Shard]++
		maxID[e.Shard] = max(maxID[e.Shard], e.DocID)
	}
	var errs []error
	listed := map[int32]bool{}
	for _, sh := range st.Shards {
		listed[sh.Shard] = true
		if live[sh.Shard] != sh.Live || (live[sh.Shard] > 0 && maxID[sh.Shard] > sh.MaxDocID) {
			errs = append(errs, fmt.Errorf("shard %d numbers %d keys here (largest doc_id %d), the state %d (largest %d)",
				sh.Shard, live[sh.Shard], maxID[sh.Shard], sh.Live, sh.MaxDocID))
		}
	}
	if whole {
		for sh, n := range live {
			if !listed[sh] {
				errs = append(errs, fmt.Errorf("shard %d numbers %d keys here, the state none", sh, n))
			}
		}
	}
	return errors.Join(errs...)
}

// pastInvalid returns next with a rebuild version past that of every
// state declared invalid (invs) of its type and scheme that it does not
// pass: data built on an invalid state is then refused by the seed's rule
// (Compatible: another V), not only by CompatibleWith.
func pastInvalid(next Version, invs []coordinator.Invalidation) Version {
	for _, inv := range invs {
		if iv, err := ParseVersion(inv.Version); err == nil && iv.T == next.T && iv.S == next.S && iv.V >= next.V {
			next.V = iv.V + 1
		}
	}
	return next
}

// Operator is what an operator's command is given (Invalidate, Reset):
// the cluster it acts in, as a master of it would.
type Operator struct {
	Kafka *streams.Cluster
	// Cluster names Kafka in the pointer, as the cluster's masters do.
	Cluster     string
	Coordinator coordinator.Coordinator
	// Holder names the operator in the lock and the invalidation.
	Holder string
	Type   int64
	Logger *slog.Logger
}

// Move is what an operator's command does: the pointer now, the state
// declared invalid (none: Invalid.Version ""), and the pointer after.
type Move struct {
	Now, After coordinator.Pointer
	Invalid    coordinator.Invalidation
}

// Invalidate declares invalid the state the pointer names, another
// cluster's (version, if not empty, must be its version), for why: as a
// master does when a handover fails for its timeout, under the write lock,
// a record on numerator.states of o's cluster says so and the pointer
// moves back to that cluster's last valid state. Unless do, it only
// returns what it would do.
func Invalidate(ctx context.Context, o Operator, version, why string, do bool) (Move, error) {
	return o.act(ctx, do, func(s *sealer, p coordinator.Pointer, cur *schemas.NumeratorState, at int64) (Move, error) {
		switch {
		case p.Cluster == "":
			return Move{}, errors.New("the pointer names no state")
		case version != "" && p.Version != version:
			return Move{}, fmt.Errorf("the pointer names state %s, not %s", p.Version, version)
		case p.Cluster == s.cfg.Cluster:
			return Move{}, fmt.Errorf("the pointer names this cluster's own state %s: invalidate it from the other data centre's cluster, or rebuild", p.Version)
		}
		inv := p.Invalidation("declared invalid by an operator: "+why, s.cfg.Holder, time.Now())
		return Move{Now: p, Invalid: inv, After: BackTo(p, cur, s.cfg.Cluster, at, inv)}, nil
	})
}

// Reset points the pointer at the last valid state of o's cluster
// (version, if not empty, must be its version), which no longer counts as
// declared invalid: for when the other data centre is gone for good and
// this one's state is to be the truth. A state of another cluster that the
// pointer named is declared invalid (its data would otherwise be taken
// for newer than the state reset to). Unless do, it only returns what it
// would do.
func Reset(ctx context.Context, o Operator, version string, do bool) (Move, error) {
	return o.act(ctx, do, func(s *sealer, p coordinator.Pointer, cur *schemas.NumeratorState, at int64) (Move, error) {
		switch {
		case cur == nil:
			return Move{}, errors.New("this cluster holds no valid state")
		case version != "" && cur.Version != version:
			return Move{}, fmt.Errorf("this cluster's last valid state is %s, not %s", cur.Version, version)
		}
		move := Move{Now: p}
		keep := coordinator.Pointer{}
		for _, inv := range p.Invalidated {
			if inv.Cluster != s.cfg.Cluster || inv.Version != cur.Version || inv.Ticket != cur.Ticket {
				keep.Invalidated = append(keep.Invalidated, inv)
			}
		}
		if p.Cluster != "" && p.Cluster != s.cfg.Cluster {
			move.Invalid = p.Invalidation("declared invalid by an operator's reset to "+cur.Version+" of "+s.cfg.Cluster, s.cfg.Holder, time.Now())
			move.After = BackTo(keep, cur, s.cfg.Cluster, at, move.Invalid)
		} else {
			move.After = pointerTo(cur, s.cfg.Cluster, at)
			move.After.Invalidated = keep.Invalidated
		}
		return move, nil
	})
}

// act takes the write lock, asks decide what to do from the pointer and
// this cluster's last valid state, and, if do, does it: records the state
// declared invalid and reports the pointer after (freeing the lock).
func (o Operator) act(ctx context.Context, do bool, decide func(s *sealer, p coordinator.Pointer, cur *schemas.NumeratorState, at int64) (Move, error)) (Move, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cl, err := o.Kafka.Producer("numerator-operator")
	if err != nil {
		return Move{}, err
	}
	defer cl.Close()
	s := &sealer{cfg: SealerConfig{Kafka: o.Kafka, Cluster: o.Cluster, Coordinator: o.Coordinator, Holder: o.Holder, Type: o.Type,
		CoordinatorWait: 30 * time.Second, Logger: o.Logger}, cl: cl, adm: kadm.NewClient(cl)}
	var lock coordinator.Lock
	if err := s.coordinated(ctx, func(ctx context.Context) (err error) {
		lock, err = o.Coordinator.Acquire(ctx, o.Holder, time.Minute)
		return err
	}); err != nil {
		return Move{}, fmt.Errorf("take the write lock: %w", err)
	}
	reported := false
	defer func() {
		if !reported {
			_ = s.coordinated(ctx, func(ctx context.Context) error { return o.Coordinator.Report(ctx, lock.Ticket, nil) })
		}
	}()
	var p coordinator.Pointer
	if err := s.coordinated(ctx, func(ctx context.Context) (err error) {
		p, _, err = o.Coordinator.State(ctx)
		return err
	}); err != nil {
		return Move{}, fmt.Errorf("read the state pointer: %w", err)
	}
	cur, _, at, err := s.current(ctx)
	if err != nil {
		return Move{}, fmt.Errorf("read this cluster's state: %w", err)
	}
	move, err := decide(s, p, cur, at)
	if err != nil || !do {
		return move, err
	}
	if move.Invalid.Version != "" {
		if err := s.record(ctx, invalidRecord(p, move.Invalid)); err != nil {
			return move, err
		}
	}
	if err := s.coordinated(ctx, func(ctx context.Context) error { return o.Coordinator.Report(ctx, lock.Ticket, &move.After) }); err != nil {
		return move, fmt.Errorf("move the pointer: %w", err)
	}
	reported = true
	o.Logger.Warn("numerator: the state pointer moved by an operator", "from", p.Version, "of", p.Cluster, "to", move.After.Version,
		"invalid", move.Invalid.Version, "by", o.Holder)
	return move, nil
}
