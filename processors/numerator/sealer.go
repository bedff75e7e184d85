package numerator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// SealerGroup is the consumer group of the sealer on numerator.generations.
const SealerGroup = "numerator-sealer"

// SealerConfig configures the sealer.
type SealerConfig struct {
	Brokers []string
	// Cluster names the Kafka cluster in the state pointer.
	Cluster string
	// View is a running view of the numerator table.
	View *goka.View
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
	Metrics      *Metrics
	Logger       *slog.Logger
}

// RunSealer reads the markers of numerator.generations and carries them
// out one by one: seal a generation, rebuild, reshard. Each is decided from
// the numerator table once the numerator group has applied everything
// before it, under the coordinator's write lock, and written in one Kafka
// transaction with the marker's offset: the decisions on numerator.results,
// the new state on numerator.states (or the marker on numerator.dead with
// the reason). It returns when ctx ends.
//
// A seal whose transaction did not commit is carried out again from the
// table: decisions already applied are kept (a plan gives every remaining
// key the id it gave it the first time), so the ids are the same.
func RunSealer(ctx context.Context, cfg SealerConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, err := sharding.Get(cfg.Scheme); err != nil {
		return err
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("offerlog-numerator-sealer"),
		kgo.TransactionalID("offerlog-numerator-sealer-"+cfg.Holder),
		kgo.ConsumerGroup(SealerGroup),
		kgo.ConsumeTopics(topics.NumeratorGenerations),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		return fmt.Errorf("sealer: %w", err)
	}
	defer sess.Close()
	// Decisions are written outside the transaction (a plan is the same
	// when part of it was applied before a crash, and read-committed
	// consumers could not tell when they have read a transactional topic to
	// its end); the state and the marker's offset are one transaction.
	plain, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("offerlog-numerator-results"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return fmt.Errorf("sealer: %w", err)
	}
	defer plain.Close()
	s := &sealer{cfg: cfg, cl: plain, adm: kadm.NewClient(plain)}
	for {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			cfg.Logger.Warn("sealer fetch failed", "topic", t, "partition", p, "err", err)
		})
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		for {
			err := s.handle(ctx, sess, recs)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			cfg.Logger.Warn("sealer: marker not carried out, retrying", "err", err, "in", cfg.RetryEvery)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(cfg.RetryEvery):
			}
		}
	}
}

type sealer struct {
	cfg SealerConfig
	cl  *kgo.Client
	adm *kadm.Client
}

// handle carries out the markers of one poll in one transaction.
func (s *sealer) handle(ctx context.Context, sess *kgo.GroupTransactSession, recs []*kgo.Record) error {
	lock, err := s.cfg.Coordinator.Acquire(ctx, s.cfg.Holder, s.cfg.LockTimeout)
	if errors.Is(err, coordinator.ErrLocked) {
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.LockRefused.Inc()
		}
		s.cfg.Logger.Info("sealer: the write lock is held, waiting", "err", err, "retry every", s.cfg.RetryEvery)
		lock, err = coordinator.AcquireRetry(ctx, s.cfg.Coordinator, s.cfg.Holder, s.cfg.LockTimeout, s.cfg.RetryEvery)
	}
	if err != nil {
		return fmt.Errorf("take the write lock: %w", err)
	}
	report := func(p *coordinator.Pointer) {
		if err := s.cfg.Coordinator.Report(ctx, lock.Ticket, p); err != nil {
			s.cfg.Logger.Warn("sealer: report refused", "ticket", lock.Ticket, "err", err)
		}
	}
	if err := sess.Begin(); err != nil {
		report(nil)
		return err
	}
	var last *schemas.NumeratorState
	for _, r := range recs {
		st, err := s.carryOut(ctx, sess, r, lock)
		if err != nil {
			_, _ = sess.End(ctx, kgo.TryAbort)
			report(nil)
			return err
		}
		if st != nil {
			last = st
		}
	}
	// A master whose lock was taken over or timed out must not write.
	if cur, ok, err := s.cfg.Coordinator.Current(ctx); err != nil || !ok || cur.Ticket != lock.Ticket {
		_, _ = sess.End(ctx, kgo.TryAbort)
		report(nil)
		return fmt.Errorf("the write lock (ticket %d) was lost before the commit: %v", lock.Ticket, err)
	}
	committed, err := sess.End(ctx, kgo.TryCommit)
	if err != nil || !committed {
		report(nil)
		return fmt.Errorf("commit: committed=%v: %w", committed, err)
	}
	if last == nil {
		report(nil)
		return nil
	}
	ends, err := s.adm.ListEndOffsets(ctx, topics.NumeratorStates)
	if err != nil {
		report(nil)
		return nil // the state is written; only the pointer is late
	}
	offsets := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { offsets[o.Partition] = o.Offset })
	report(&coordinator.Pointer{Version: last.Version, Cluster: s.cfg.Cluster, Topic: topics.NumeratorStates, Offsets: offsets})
	return nil
}

// current returns the last state written that decodes, or the empty state.
// A record of numerator.states that does not decode is passed over (and
// logged): it cannot be a state this sealer wrote, and must not stop it.
func (s *sealer) current(ctx context.Context) (Version, error) {
	ends, err := streams.EndOffsets(ctx, s.adm, topics.NumeratorStates)
	if err != nil {
		return Version{}, err
	}
	empty := Version{T: s.cfg.Type, S: s.cfg.Scheme}
	end := ends[0]
	if end == 0 {
		return empty, nil
	}
	// The last states are at the end; read back further only when none of
	// the last ones decodes.
	for back := int64(20); ; back *= 4 {
		from := max(0, end-back)
		var last *schemas.NumeratorState
		err := streams.ReadRange(ctx, s.cfg.Brokers, topics.NumeratorStates, map[int32]int64{0: from}, map[int32]int64{0: end}, func(r *kgo.Record) {
			var st schemas.NumeratorState
			if err := schemas.NumeratorStates.Decode(r.Value, &st); err != nil {
				s.cfg.Logger.Warn("sealer: undecodable state passed over", "offset", r.Offset, "err", err)
				return
			}
			if _, err := ParseVersion(st.Version); err != nil {
				s.cfg.Logger.Warn("sealer: state with a bad version passed over", "offset", r.Offset, "version", st.Version)
				return
			}
			last = &st
		})
		if err != nil {
			return Version{}, err
		}
		if last != nil {
			return ParseVersion(last.Version)
		}
		if from == 0 {
			return empty, nil
		}
	}
}

// carryOut decides one marker and produces its records in the open
// transaction. It returns the new state, or nil for a rejected marker.
func (s *sealer) carryOut(ctx context.Context, sess *kgo.GroupTransactSession, r *kgo.Record, lock coordinator.Lock) (*schemas.NumeratorState, error) {
	dead := func(reason string) (*schemas.NumeratorState, error) {
		return nil, streams.SendDeadLetter(ctx, sess, topics.NumeratorDead, SealerGroup, r, reason)
	}
	var m schemas.GenerationMarker
	if err := schemas.GenerationMarkers.Decode(r.Value, &m); err != nil {
		return dead(fmt.Sprintf("undecodable marker: %v", err))
	}
	v, err := s.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the current state: %w", err)
	}
	next := v
	scheme, _ := sharding.Get(v.S)
	switch m.Action {
	case schemas.MarkerSeal:
		if m.Generation <= v.G {
			return dead(fmt.Sprintf("generation %d is not after the sealed generation %d", m.Generation, v.G))
		}
		next.G = m.Generation
	case schemas.MarkerRebuild:
		next.V++
	case schemas.MarkerReshard:
		sch, err := sharding.Get(m.Scheme)
		if err != nil {
			return dead(err.Error())
		}
		scheme, next.S, next.V = sch, m.Scheme, next.V+1
	default:
		return dead(fmt.Sprintf("unknown action %q", m.Action))
	}
	if err := s.caughtUp(ctx); err != nil {
		return nil, err
	}
	// One shard's entries in memory at a time.
	var readErr error
	plan := PlanShards(scheme, m, next.G, s.cfg.TTL, s.cfg.RebuildShare, func(shard int) []Entry {
		es, err := s.entries(func(k sharding.Key) bool { return scheme.Shard(k) == shard })
		if err != nil && readErr == nil {
			readErr = err
		}
		return es
	})
	if readErr != nil {
		return nil, readErr
	}
	if m.Action == schemas.MarkerSeal && plan.Seen == 0 {
		return dead(fmt.Sprintf("generation %d is unknown: no offer was seen in it", m.Generation))
	}
	if plan.Rebuilt && m.Action == schemas.MarkerSeal {
		next.V++
	}
	st := &schemas.NumeratorState{Version: next.String(), Generation: next.G, Scheme: next.S, Rebuilt: plan.Rebuilt,
		Shards: plan.Shards, Holder: lock.Holder, Ticket: lock.Ticket, SealedAt: time.Now().UTC().Truncate(time.Millisecond)}
	results := make([]*kgo.Record, 0, len(plan.Assignments))
	for _, a := range plan.Assignments {
		out := &schemas.Assignment{BusinessID: int64(a.Key.BusinessID), OfferID: a.Key.OfferID, ShopID: int64(a.Key.ShopID),
			WarehouseID: int64(a.Key.WarehouseID), Shard: int32(a.Shard), DocID: a.DocID, Version: st.Version, Generation: next.G}
		data, err := schemas.Assignments.Encode(out)
		if err != nil {
			return nil, err
		}
		results = append(results, &kgo.Record{Topic: topics.NumeratorResults, Key: []byte(a.Key.String()), Value: data})
	}
	if len(results) > 0 {
		if err := s.cl.ProduceSync(ctx, results...).FirstErr(); err != nil {
			return nil, fmt.Errorf("write the decisions: %w", err)
		}
	}
	data, err := schemas.NumeratorStates.Encode(st)
	if err != nil {
		return nil, err
	}
	if err := sess.ProduceSync(ctx, &kgo.Record{Topic: topics.NumeratorStates, Key: []byte(fmt.Sprint(next.T)), Value: data}).FirstErr(); err != nil {
		return nil, err
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Seals.With(string(m.Action)).Inc()
	}
	s.cfg.Logger.Info("numerator state written", "action", m.Action, "version", st.Version, "changes", len(plan.Assignments))
	return st, nil
}

// caughtUp waits until the numerator group has applied every offer and
// result written so far and the view holds the table that results.
func (s *sealer) caughtUp(ctx context.Context) error {
	ends, err := s.adm.ListEndOffsets(ctx, topics.NumeratorOffers, topics.NumeratorResults)
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	if err := streams.WaitCommitted(ctx, s.adm, string(Group), ends.Offsets()); err != nil {
		return fmt.Errorf("wait for the numerator group: %w", err)
	}
	table, err := s.adm.ListEndOffsets(ctx, string(Table))
	if err != nil {
		return fmt.Errorf("end offsets of the table: %w", err)
	}
	for {
		stats := s.cfg.View.Stats(ctx)
		behind := false
		table.Each(func(o kadm.ListedOffset) {
			if o.Offset <= 0 {
				return
			}
			ps, ok := stats.Partitions[o.Partition]
			if !ok || ps.Input == nil || ps.Input.LastOffset < o.Offset-1 {
				behind = true
			}
		})
		if !behind {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// entries reads the entries of the table whose keys keep accepts, from the
// view, in key order.
func (s *sealer) entries(keep func(sharding.Key) bool) ([]Entry, error) {
	it, err := s.cfg.View.Iterator()
	if err != nil {
		return nil, fmt.Errorf("iterate the table: %w", err)
	}
	defer it.Release()
	var out []Entry
	for it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", it.Key(), err)
		}
		e, ok := v.(*schemas.NumeratorEntry)
		if !ok || e == nil {
			continue
		}
		k := sharding.Key{BusinessID: uint64(e.BusinessID), OfferID: e.OfferID, ShopID: uint64(e.ShopID), WarehouseID: uint64(e.WarehouseID)}
		if !keep(k) {
			continue
		}
		out = append(out, Entry{Key: k, DocID: e.DocID, LastSeen: e.LastSeen, Shard: int(e.Shard)})
	}
	slices.SortFunc(out, ByKey)
	return out, nil
}
