package table

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A Group is a consumer group that keeps a table, as a goka processor with a
// group table does, but takes its input a batch at a time: each partition's
// records waiting for its worker (the loop's batch) are read from the local
// store through one iterator, handled, and written back as one Pebble batch,
// its changelog records and outputs produced together. goka hands a callback
// one message and costs a store Get, a Set and a produce per message; a
// table whose messages are small and many (the numerator's sightings and
// decisions) spends most of its time there (docs/BENCHMARKS.md).
//
// It keeps goka's contract, so that goka views of the table (and a store
// left by a goka processor of the same group) work with it unchanged: the
// table topic is the changelog, keyed as the inputs and co-partitioned with
// them; the local store of partition p is a Pebble store at
// StateDirOf(Group)/pebble/<Table>.<p> holding the values and, under
// "__offset", the last changelog offset it holds.
//
// Order of a batch, which makes a kill -9 at any moment safe: the changelog
// records, the outputs and a mark naming the batch's last input record are
// one Kafka transaction of the partition's own transactional id
// (topics.Table.Writer), committed (commit); then the store is written
// (values and offsets in one batch), then the inputs' offsets are marked
// for commit. The store never holds what the changelog does not; a
// partition's store is brought up to the changelog's end before its first
// batch after every assignment (a store without a WAL, killed, comes back
// with a prefix of its batches); and input the changelog marks as applied
// is not handed to the handler again.
//
// The member given a partition initialises its transactional id before it
// reads the changelog (fence): the broker aborts what an earlier holder
// left open and refuses that holder's later writes. So a member that lost
// its partitions without knowing it (cut off past its session, its batch
// still on the wire) can never land a batch after its successor's writes,
// decided on a table the successor has changed since: what a member
// restores is all that will ever come before its own writes. Every reader
// of the changelog and the outputs reads committed records only.
type Group struct {
	Streams Config
	// Name is the consumer group's, and names the local state.
	Name string
	// Table is the changelog topic, partitioned as the inputs.
	Table topics.Table
	// Inputs are consumed by the group; they are co-partitioned with Table
	// (the group assigns partitions by range, the same numbers of every
	// input to one member).
	Inputs []string
	// Outputs are the topics Emit may write to.
	Outputs []string
	// DeadTopic receives the records a batch's handler fails on, one by
	// one (the Loop's rule); a handler dead-letters what it judges itself
	// with Emit, so that a replay treats those as outputs.
	DeadTopic string
	// Handle handles a batch of one input partition. It reads the table
	// with Values and writes it with Set; it returns an error as a Loop's
	// BatchHandler does, and nothing it set or emitted is kept then.
	Handle func(ctx context.Context, b BatchTable) error
	// OnReady, if set, is called once, when the partitions of the group's
	// first assignment have read their changelogs to the end.
	OnReady func()
	Metrics *streams.LoopMetrics
	Logger  *slog.Logger

	// prod writes Visit's emits (outside the batches' transactions, which
	// each partition's writer makes: tableStore.tx).
	prod   *kgo.Client
	adm    *kadm.Client
	counts map[string]int32 // partitions of Table and Outputs
	// ingestAt and ingestChunk, if set, replace ingestAtLeast and
	// ingestChunk (tests).
	ingestAt, ingestChunk int64

	mu     sync.Mutex
	stores map[int32]*tableStore

	restored atomic.Int64
}

// tableStore is one partition of the table's local store.
type tableStore struct {
	mu sync.Mutex // held by the batch that uses the store
	db *pebble.DB
	// offset is the last changelog offset the store holds (-1: none).
	offset int64
	// current is whether the store has read the changelog to its end since
	// the partition was last assigned to this member.
	current bool
	// epoch counts the partition's revocations: a catch-up started for an
	// assignment does nothing once the partition was taken away since.
	epoch int
	// applied is, per input topic, the offset of the last record of this
	// partition whose batch the table holds (absent: none).
	applied map[string]int64
	// pending are the marks of batches whose outputs are written, for the
	// partition's next changelog records to carry (commit), at most one
	// per input topic. A partition revoked, or a group stopping, writes
	// them on a record of their own (writePending).
	pending []kgo.RecordHeader
	// tx writes the partition's batches: a producer of the partition's
	// transactional id, initialised when the partition was last given to
	// this member (fence). Nil while the partition is not this member's.
	tx *kgo.Client
	// lastKey is the key of the last changelog record this member wrote to
	// the partition in a batch that committed whole: a mark of its own
	// carries its value (the store's, which is the changelog's) again. A
	// batch's transaction that fails leaves nothing, and lastKey as it was.
	lastKey []byte
}

// pend makes mark (an appliedHeader) the pending one of its input topic.
func (st *tableStore) pend(mark kgo.RecordHeader) {
	topic, _, _ := cutLast(string(mark.Value))
	for i, h := range st.pending {
		if t, _, _ := cutLast(string(h.Value)); t == topic {
			st.pending[i] = mark
			return
		}
	}
	st.pending = append(st.pending, mark)
}

// writePending writes partition p's pending marks on a changelog record
// of their own: the last key this member wrote, its value again. Only
// while the partition is this member's (a revocation, a stop before the
// group is left): never for one lost, whose next owner may have written
// the key since. Called with st.mu held.
func (g *Group) writePending(ctx context.Context, p int32, st *tableStore) error {
	if len(st.pending) == 0 || st.lastKey == nil || st.tx == nil {
		return nil
	}
	value, err := storedValue(st.db, st.lastKey) // nil: deleted, a tombstone again
	if err != nil {
		return err
	}
	r := &kgo.Record{Topic: string(g.Table), Partition: p, Key: st.lastKey, Value: value, Headers: slices.Clone(st.pending)}
	if err := g.transact(ctx, st, []*kgo.Record{r}); err != nil {
		return fmt.Errorf("%s: produce the changelog's marks: %w", g.Name, err)
	}
	st.pending = st.pending[:0]
	if r.Offset > st.offset {
		st.offset = r.Offset
		if err := st.db.Set([]byte(offsetKey), []byte(strconv.FormatInt(r.Offset, 10)), pebble.NoSync); err != nil {
			return err
		}
	}
	return nil
}

// writeAllPending writes the pending marks of every partition not in a
// batch, within 5 s in all (a stop must not wait for a broker that does
// not answer): what a stop leaves unwritten is a batch decided again on a
// store restored from the changelog.
func (g *Group) writeAllPending() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.mu.Lock()
	stores := maps.Clone(g.stores)
	g.mu.Unlock()
	for p, st := range stores {
		if !st.mu.TryLock() {
			continue // in a batch, which the stop ends
		}
		err := g.writePending(ctx, p, st)
		st.mu.Unlock()
		if err != nil {
			g.Logger.Warn("table marks not written on stop", "group", g.Name, "partition", p, "err", err)
			return
		}
	}
}

// topicWait bounds the wait for a table group's topics to be known.
const topicWait = 30 * time.Second

// appliedHeader, on a changelog record (a batch's mark: see commit),
// names the input record a batch ended with ("topic/partition/offset").
// Once it is in the changelog the whole batch and its outputs are: a store
// caught up from the changelog after a crash knows which input records its
// table holds, and they are not handled again. (Without
// it, input handled again after a crash is decided again: a key with more
// messages since the last commit than a handler remembers answers (the
// registry's 16) could get another answer the second time.)
const appliedHeader = "offerlog-applied"

// appliedKey is where a store keeps, per input topic, the offset of the
// last input record its table holds. It sorts before every key a table can
// hold that is printable.
func appliedKey(topic string) []byte { return []byte("\x00applied/" + topic) }

// internalKey reports whether key is one of the store's own (its changelog
// offset, its applied offsets), not a value of the table.
func internalKey(key []byte) bool {
	return string(key) == offsetKey || (len(key) > 0 && key[0] == 0)
}

// Update is one input partition's batch handed to a Group's
// handler, with the table of that partition.
type Update struct {
	*streams.Batch
	g     *Group
	st    *tableStore
	sets  map[string][]byte
	order []string // keys of sets in the order first set
	out   []*kgo.Record
	after []func()
}

// Run consumes until ctx ends (nil) or a batch fails fatally; the stores
// are flushed and closed before it returns.
func (g *Group) Run(ctx context.Context) error {
	if err := g.Streams.Validate(); err != nil {
		return err
	}
	if g.Name == "" || g.Table == "" || len(g.Inputs) == 0 || g.Handle == nil {
		return errors.New("table: a group needs a group, a table, inputs and a handler")
	}
	if g.Logger == nil {
		g.Logger = slog.Default()
	}
	prod, err := g.Streams.Cluster.Producer(g.Name+"-table", kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", g.Name, err)
	}
	defer prod.Close()
	g.prod, g.adm = prod, g.Streams.Cluster.Admin()
	g.counts = map[string]int32{}
	// A topic just made may be unknown to a broker for a moment; one that
	// stays unknown was never made (goka made the topics it missed, this
	// runtime leaves that to the catalogue: offerlog topics ensure).
	partitions := func(t string) (int32, error) {
		pctx, cancel := context.WithTimeout(ctx, topicWait)
		defer cancel()
		n, err := streams.PartitionsOf(pctx, g.adm, t)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (is the topic created? offerlog topics ensure makes the catalogue's and the stages')", err)
		}
		return n, err
	}
	for _, t := range append([]string{string(g.Table)}, g.Outputs...) {
		n, err := partitions(t)
		if err != nil {
			return fmt.Errorf("%s: %w", g.Name, err)
		}
		g.counts[t] = n
	}
	for _, t := range g.Inputs {
		n, err := partitions(t)
		if err != nil {
			return fmt.Errorf("%s: %w", g.Name, err)
		}
		if n != g.counts[string(g.Table)] {
			return fmt.Errorf("%s: %s has %d partitions, its table %s %d: they must be co-partitioned", g.Name, t, n, g.Table, g.counts[string(g.Table)])
		}
	}
	// Under mu: Visit (another goroutine's) reads the stores, and through
	// them the producer and the counts set above.
	g.mu.Lock()
	g.stores = map[int32]*tableStore{}
	g.mu.Unlock()
	defer g.closeStores()
	// The loop runs until ctx ends and the pending marks are written: the
	// partitions are still this member's until the loop leaves the group.
	parent := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// Catch-ups started on assignment and the marks written on stop, owned
	// here: stopped and waited for before the stores close.
	var catchUps sync.WaitGroup
	defer func() { cancel(); catchUps.Wait() }()
	catchUps.Go(func() {
		select {
		case <-ctx.Done(): // the loop failed
		case <-parent.Done():
			g.writeAllPending()
			cancel()
		}
	})
	if g.Streams.Standby {
		catchUps.Go(func() { g.standby(ctx) })
	}
	var readyOnce sync.Once
	assigned := func(ps map[string][]int32) {
		parts := map[int32]int{} // partition -> its epoch now
		for _, list := range ps {
			for _, p := range list {
				st, err := g.store(p)
				if err != nil {
					g.Logger.Warn("table store not opened", "group", g.Name, "partition", p, "err", err)
					continue // its first batch tries again
				}
				st.mu.Lock()
				parts[p] = st.epoch
				st.mu.Unlock()
			}
		}
		catchUps.Go(func() {
			for p, epoch := range parts {
				for attempt := 1; ; attempt++ {
					err := g.current(ctx, p, epoch)
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						return
					}
					wait := streams.DefaultBackoff.Wait(attempt)
					g.Logger.Warn("table partition not caught up, trying again", "group", g.Name, "partition", p, "err", err, "in", wait)
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
			}
			if g.OnReady != nil {
				readyOnce.Do(g.OnReady)
			}
		})
	}
	return streams.RunLoop(ctx, streams.LoopConfig{
		Name: g.Name, Cluster: g.Streams.Cluster, Group: g.Name, Topics: g.Inputs,
		BatchHandler: g.batch, DeadTopic: g.DeadTopic, OnAssigned: assigned, OnRevoked: g.revoked, OnLost: g.lost,
		ClientOptions: []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())},
		Metrics:       g.Metrics, Logger: g.Logger,
	})
}

// current brings partition p's store up to the changelog's end, unless it
// is there since its assignment, or the partition was taken away since the
// assignment of epoch.
func (g *Group) current(ctx context.Context, p int32, epoch int) error {
	st, err := g.store(p)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.current || st.epoch != epoch {
		return nil
	}
	return g.catchUp(ctx, p, st)
}

func (g *Group) closeStores() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p, st := range g.stores {
		st.mu.Lock()
		st.closeWriter()
		if err := errors.Join(st.db.Flush(), st.db.Close()); err != nil {
			g.Logger.Error("close table store", "group", g.Name, "partition", p, "err", err)
		}
		st.mu.Unlock()
	}
	g.stores = nil
}

// writePendingNow is writePending within 10 s, for a partition this member
// stops holding.
func (g *Group) writePendingNow(p int32, st *tableStore) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return g.writePending(ctx, p, st)
}

// revoked writes the pending marks of partitions taken away (still this
// member's) and lets their stores go.
func (g *Group) revoked(ps map[string][]int32) { g.letGo(ps, true) }

// lost lets the stores of partitions lost go, writing nothing: another
// member may hold them already.
func (g *Group) lost(ps map[string][]int32) { g.letGo(ps, false) }

// letGo marks the stores of partitions taken away: if they come back,
// another member may have written the changelog meanwhile. With mark, it
// writes their pending marks first.
func (g *Group) letGo(ps map[string][]int32, mark bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, parts := range ps {
		for _, p := range parts {
			if st, ok := g.stores[p]; ok {
				st.mu.Lock()
				if mark {
					if err := g.writePendingNow(p, st); err != nil {
						g.Logger.Warn("table marks not written on revocation", "group", g.Name, "partition", p, "err", err)
					}
				}
				st.pending, st.lastKey = nil, nil
				st.closeWriter()
				st.current = false
				st.epoch++
				st.mu.Unlock()
			}
		}
	}
}

// store returns partition p's store, opened (not yet current) at first use.
func (g *Group) store(p int32) (*tableStore, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st, ok := g.stores[p]; ok {
		return st, nil
	}
	mem := g.Streams.StoreMemory
	if mem <= 0 {
		mem = DefaultStoreMemory
	}
	dir := filepath.Join(g.Streams.StateDirOf(g.Name), "pebble", fmt.Sprintf("%s.%d", g.Table, p))
	db, err := OpenPebble(dir, mem, g.Streams.Cache, false, g.Streams.Logger)
	if err != nil {
		return nil, err
	}
	st := &tableStore{db: db, offset: -1, applied: map[string]int64{}}
	for _, t := range g.Inputs {
		o, ok, err := storedInt(db, appliedKey(t))
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("table store %s: applied offset of %s: %w", dir, t, err)
		}
		if ok {
			st.applied[t] = o
		}
	}
	o, ok, err := storedInt(db, []byte(offsetKey))
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("table store %s: offset: %w", dir, err)
	}
	if ok {
		st.offset = o
	}
	g.stores[p] = st
	return st, nil
}

// storedInt reads the decimal number a store keeps under key (ok false:
// none).
func storedInt(db *pebble.DB, key []byte) (n int64, ok bool, err error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	n, err = strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q: %w", v, err)
	}
	return n, true, nil
}

// storedValue returns a copy of key's value in db, nil if it has none.
func storedValue(db *pebble.DB, key []byte) ([]byte, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// catchUp reads partition p of the changelog from after the store's offset
// to its end into the store, and makes the store current: the partition's
// batches may use it. Called with st.mu held.
func (g *Group) catchUp(ctx context.Context, p int32, st *tableStore) error {
	if err := g.fence(ctx, p, st); err != nil {
		return err
	}
	ends, err := g.adm.ListEndOffsets(ctx, string(g.Table))
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", g.Table, err)
	}
	n, err := g.follow(ctx, p, st, ends, "restored")
	if err != nil {
		return err
	}
	g.restored.Add(n)
	st.current = true
	return nil
}

// follow reads partition p of the changelog from after the store's offset
// to its end (as ends lists it) into the store and returns how many
// records it read (logged as what it did). The
// store's offset is written with every chunk of restoreChunk records, so a
// restore cut short (a kill, a revocation) resumes where it was: the store
// never holds what the changelog does not, and holds a prefix of it.
// Called with st.mu held.
func (g *Group) follow(ctx context.Context, p int32, st *tableStore, ends kadm.ListedOffsets, what string) (int64, error) {
	end, ok := ends.Lookup(string(g.Table), p)
	if !ok || end.Err != nil {
		return 0, fmt.Errorf("end offset of %s[%d]: %v", g.Table, p, end.Err)
	}
	if st.offset+1 >= end.Offset {
		return 0, nil
	}
	from := st.offset + 1
	if end.Offset-from >= cmp.Or(g.ingestAt, ingestAtLeast) {
		n, err := g.ingest(ctx, p, st, from, end.Offset)
		if err != nil {
			return n, fmt.Errorf("restore %s[%d]: %w", g.Table, p, err)
		}
		g.Logger.Info("table partition "+what, "group", g.Name, "table", g.Table, "partition", p,
			"from", from, "to", end.Offset, "records", n, "as", "sorted tables")
		return n, nil
	}
	b := st.db.NewBatch()
	var n int64
	var failed error
	chunk := func(last int64) error {
		if err := b.Set([]byte(offsetKey), []byte(strconv.FormatInt(last, 10)), nil); err != nil {
			return err
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b.Reset()
		st.offset = last
		return nil
	}
	err := streams.ReadRange(ctx, g.Streams.Cluster, string(g.Table), map[int32]int64{p: from}, map[int32]int64{p: end.Offset}, func(r *kgo.Record) {
		if failed != nil {
			return
		}
		if r.Value == nil {
			failed = b.Delete(r.Key, nil)
		} else {
			failed = b.Set(r.Key, r.Value, nil)
		}
		for _, h := range r.Headers {
			if h.Key == appliedHeader && failed == nil {
				failed = st.applyHeader(b, string(h.Value))
			}
		}
		if n++; n%restoreChunk == 0 && failed == nil {
			failed = chunk(r.Offset)
		}
	})
	if err = errors.Join(err, failed); err != nil {
		_ = b.Close()
		return n, fmt.Errorf("restore %s[%d]: %w", g.Table, p, err)
	}
	// Everything below the end is in the store now, or gone from the
	// topic (compaction).
	if err := errors.Join(chunk(end.Offset-1), b.Close(), st.db.Flush()); err != nil {
		return n, fmt.Errorf("restore %s[%d]: %w", g.Table, p, err)
	}
	g.Logger.Info("table partition "+what, "group", g.Name, "table", g.Table, "partition", p,
		"from", from, "to", end.Offset, "records", n)
	return n, nil
}

// restoreChunk is how many changelog records a restore writes to a store
// at a time, with the offset it reached.
const restoreChunk = 10_000

// ingest reads partition p of the changelog from offset from to end into
// st as sorted tables (ingestSorted), writing after each chunk the offset
// reached and the marks the chunk held; a restore cut short resumes from
// the offset written. Called with st.mu held.
func (g *Group) ingest(ctx context.Context, p int32, st *tableStore, from, end int64) (int64, error) {
	// The partition's own directory of table files.
	dir := filepath.Join(g.Streams.StateDirOf(g.Name), "pebble", fmt.Sprintf("%s.%d.ingest", g.Table, p))
	var marks []string
	return ingestSorted(ctx, sortedIngest{
		cluster: g.Streams.Cluster, db: st.db, dir: dir, topic: string(g.Table),
		from: map[int32]int64{p: from}, end: map[int32]int64{p: end}, chunk: g.ingestChunk,
		seen: func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == appliedHeader {
					marks = append(marks, string(h.Value))
				}
			}
		},
		done: func(b *pebble.Batch, last map[int32]int64) error {
			for _, m := range marks {
				if err := st.applyHeader(b, m); err != nil {
					return err
				}
			}
			marks = marks[:0]
			return b.Set([]byte(offsetKey), []byte(strconv.FormatInt(last[p], 10)), nil)
		},
		committed: func(last map[int32]int64) { st.offset = last[p] },
		progress: func(done float64, n int64, mbs float64) {
			g.Logger.Info("table partition restoring", "group", g.Name, "table", g.Table, "partition", p,
				"done", fmt.Sprintf("%.0f %%", 100*done), "records", n, "MB/s", fmt.Sprintf("%.0f", mbs))
		},
	})
}

// Restored returns how many changelog records the group read into its
// stores to make partitions it was given current: all of a partition's
// on an empty disk, the tail when its store holds the rest (a restart,
// or a standby's copy).
func (g *Group) Restored() int64 { return g.restored.Load() }

// Offsets returns, for every partition whose store this member has open,
// the last changelog offset the store holds (-1: none): a standby's
// copies are as fresh as these.
func (g *Group) Offsets() map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int32]int64, len(g.stores))
	for p, st := range g.stores {
		st.mu.Lock()
		out[p] = st.offset
		st.mu.Unlock()
	}
	return out
}

// Current returns how many partitions this member holds current: owned,
// their stores caught up with the changelog.
func (g *Group) Current() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, st := range g.stores {
		st.mu.Lock()
		if st.current {
			n++
		}
		st.mu.Unlock()
	}
	return n
}

// standbyEvery is how often a standby member reads the tails of the
// partitions it does not own.
const standbyEvery = time.Second

// standby keeps a warm copy of every partition of the table this member
// does not own (Config.Standby) until ctx ends: every standbyEvery it
// reads each one's changelog tail into its store, so that taking one over
// reads only what was written since. A partition owned (current) is left
// to its batches; the copy is always a prefix of the changelog, whoever
// writes it.
func (g *Group) standby(ctx context.Context) {
	t := time.NewTicker(standbyEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// One listing of the ends a round, for every partition.
		ends, err := g.adm.ListEndOffsets(ctx, string(g.Table))
		if err != nil {
			if ctx.Err() == nil {
				g.Logger.Warn("standby copies not brought up to date", "group", g.Name, "err", err)
			}
			continue
		}
		for p := range g.counts[string(g.Table)] {
			st, err := g.store(p)
			if err != nil {
				g.Logger.Warn("standby store not opened", "group", g.Name, "partition", p, "err", err)
				continue
			}
			st.mu.Lock()
			if !st.current {
				_, err = g.follow(ctx, p, st, ends, "followed (standby)")
			}
			st.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				g.Logger.Warn("standby copy not brought up to date", "group", g.Name, "partition", p, "err", err)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}

func (g *Group) batch(ctx context.Context, b *streams.Batch) error {
	st, err := g.store(b.Partition)
	if err != nil {
		return streams.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.current {
		if err := g.catchUp(ctx, b.Partition, st); err != nil {
			return err
		}
	}
	if applied, ok := st.applied[b.Topic]; ok && b.Records[0].Offset <= applied {
		// Handled before a crash, their table and outputs written: the
		// input's commit was what was lost.
		i := 0
		for i < len(b.Records) && b.Records[i].Offset <= applied {
			i++
		}
		if i == len(b.Records) {
			return nil
		}
		b.Skip(i)
	}
	tb := &Update{Batch: b, g: g, st: st, sets: map[string][]byte{}}
	if err := g.Handle(ctx, tb); err != nil {
		return err
	}
	if err := tb.commit(ctx); err != nil {
		return err
	}
	for _, fn := range tb.after {
		fn()
	}
	return nil
}

// AfterCommit calls fn once the batch is committed (Context.AfterCommit).
func (b *Update) AfterCommit(fn func()) { b.after = append(b.after, fn) }

// Input returns the batch of input records.
func (b *Update) Input() *streams.Batch { return b.Batch }

// Names returns the group's name and its table's.
func (b *Update) Names() (group, table string) { return b.g.Name, string(b.g.Table) }

// Values returns the table's current value of each of keys that has one,
// what this batch set included. The keys are read in order through one
// iterator; they need not be sorted or distinct. (A Get per key costs more:
// Pebble makes an iterator for each; at 1 M offers the aggregate's reads
// took 11.8 % of the scenario's CPU that way, 1.6 % through one iterator.)
//
// A store that fails to read (an error, or a panic in Pebble) is a Fatal
// error: the records are not at fault, and dead-lettering them would drop
// every command of the partition unanswered; the group stops and its
// supervisor restarts it on its store opened again.
func (b *Update) Values(keys []string) (out map[string][]byte, err error) {
	out = make(map[string][]byte, len(keys))
	var read []string
	for _, k := range keys {
		if v, ok := b.sets[k]; ok {
			out[k] = v
		} else {
			read = append(read, k)
		}
	}
	slices.Sort(read)
	read = slices.Compact(read)
	if len(read) == 0 {
		return out, nil
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("panic: %v", p)
		}
		if err != nil {
			out, err = nil, streams.Fatal(fmt.Errorf("table %s: read the store: %w", b.g.Table, err))
		}
	}()
	it, err := b.st.db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	for _, k := range read {
		if it.SeekGE([]byte(k)) && bytes.Equal(it.Key(), []byte(k)) {
			out[k] = bytes.Clone(it.Value())
		}
	}
	return out, errors.Join(it.Error(), it.Close())
}

// Set sets key's value in the table (nil deletes it) once the batch is
// committed.
func (b *Update) Set(key string, value []byte) {
	if _, ok := b.sets[key]; !ok {
		b.order = append(b.order, key)
	}
	b.sets[key] = value
}

// Emit writes out, an output of the input record in, with the batch: to the
// partition its key hashes to, as a goka emit does. A replay drops (or
// marks) the outputs of input records the group had processed before it.
func (b *Update) Emit(in, out *kgo.Record) {
	if run := b.g.Streams.replay; run != nil && !run.Keep(in, out) {
		return
	}
	b.out = append(b.out, out)
}

// commit writes the batch: its changelog records and its outputs in one
// transaction of the partition's writer, then its values, the changelog
// offset and the applied input offset to the store.
//
// The mark naming the batch's last input record as applied rides on its
// last changelog record: a store restored from the changelog skips the
// input whose table and outputs it holds, which commit or vanish together.
// A batch without changelog records leaves its mark pending: the
// partition's next changelog records carry it, or a revocation or a stop
// writes it (writePending); one not yet written (a kill before) means the
// batch's input is handed to the handler again, on a table that holds
// nothing of it, and its outputs are written again. Until 2026-12-03 the
// changelog and the outputs were two produces, each acknowledged before
// the next: a batch could not hold two records of a key (a kill between
// the two left the second's value without the first's outputs), and a
// member cut off past its session could land a batch after its
// successor's writes (Group says how the writer fences it). A store on
// its own disk knows its applied offsets without the changelog.
func (b *Update) commit(ctx context.Context) error {
	g := b.g
	if err := g.place(b.out); err != nil {
		return streams.Fatal(err)
	}
	lastIn := b.Records[len(b.Records)-1]
	lastKey := b.st.lastKey
	if len(b.order) > 0 {
		lastKey = []byte(b.order[len(b.order)-1])
	}
	mark := kgo.RecordHeader{Key: appliedHeader, Value: fmt.Appendf(nil, "%s/%d/%d", lastIn.Topic, lastIn.Partition, lastIn.Offset)}
	recs := make([]*kgo.Record, 0, len(b.order)+len(b.out))
	for _, k := range b.order {
		recs = append(recs, &kgo.Record{Topic: string(g.Table), Partition: b.Partition, Key: []byte(k), Value: b.sets[k]})
	}
	if len(recs) > 0 {
		// The marks of earlier batches, and this one's.
		recs[0].Headers = slices.Clone(b.st.pending)
		recs[len(recs)-1].Headers = append(recs[len(recs)-1].Headers, mark)
	}
	recs = append(recs, b.out...)
	if len(recs) > 0 {
		if err := g.transact(ctx, b.st, recs); err != nil {
			return fmt.Errorf("%s: write the batch: %w", g.Name, err)
		}
	}
	last := b.st.offset
	for _, r := range recs {
		if r.Topic == string(g.Table) {
			last = max(last, r.Offset)
		}
	}
	if len(b.order) > 0 {
		b.st.pending = b.st.pending[:0]
	} else if len(b.out) > 0 {
		b.st.pend(mark)
	}
	wb := b.st.db.NewBatch()
	defer wb.Close()
	for _, k := range b.order {
		var err error
		if v := b.sets[k]; v == nil {
			err = wb.Delete([]byte(k), nil)
		} else {
			err = wb.Set([]byte(k), v, nil)
		}
		if err != nil {
			return streams.Fatal(err)
		}
	}
	if err := errors.Join(wb.Set([]byte(offsetKey), []byte(strconv.FormatInt(last, 10)), nil),
		wb.Set(appliedKey(lastIn.Topic), []byte(strconv.FormatInt(lastIn.Offset, 10)), nil)); err != nil {
		return streams.Fatal(err)
	}
	if err := wb.Commit(pebble.NoSync); err != nil {
		return streams.Fatal(fmt.Errorf("%s: write the table store: %w", g.Name, err))
	}
	b.st.offset = last
	b.st.applied[lastIn.Topic] = lastIn.Offset
	b.st.lastKey = lastKey
	return nil
}

// place sets each output's partition to the one its key hashes to, as a
// goka emit does.
func (g *Group) place(out []*kgo.Record) error {
	for _, r := range out {
		n, ok := g.counts[r.Topic]
		if !ok {
			return fmt.Errorf("%s: a write to %s, not one of its outputs", g.Name, r.Topic)
		}
		r.Partition = streams.Partition(string(r.Key), n)
	}
	return nil
}

// applyHeader records in the store (through b) the input offset an
// appliedHeader value names, if it is this store's partition's and later
// than what it holds.
func (st *tableStore) applyHeader(b *pebble.Batch, v string) error {
	rest, offset, ok := cutLast(v)
	if !ok {
		return nil
	}
	topic, _, ok := cutLast(rest)
	if !ok {
		return nil
	}
	if cur, ok := st.applied[topic]; ok && cur >= offset {
		return nil
	}
	st.applied[topic] = offset
	return b.Set(appliedKey(topic), []byte(strconv.FormatInt(offset, 10)), nil)
}

// cutLast splits "a/b/n" into "a/b" and n.
func cutLast(s string) (string, int64, bool) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 64)
	return s[:i], n, err == nil
}

// Visit calls fn with every key and value of the partitions this member
// holds (caught up since their assignment), a partition at a time with its
// batches held, and writes the records fn returns, as a goka visitor's
// emits: each to the partition its key hashes to, in one produce per
// partition. It returns how many pairs it visited.
func (g *Group) Visit(ctx context.Context, fn func(key string, value []byte) []*kgo.Record) (int, error) {
	g.mu.Lock()
	var parts []int32
	for p, st := range g.stores {
		st.mu.Lock()
		if st.current {
			parts = append(parts, p)
		}
		st.mu.Unlock()
	}
	g.mu.Unlock()
	slices.Sort(parts)
	n := 0
	for _, p := range parts {
		out, visited, err := g.visitPartition(p, fn)
		n += visited
		if err != nil {
			return n, err
		}
		if err := g.place(out); err != nil {
			return n, err
		}
		if len(out) > 0 {
			if err := g.prod.ProduceSync(ctx, out...).FirstErr(); err != nil {
				return n, fmt.Errorf("%s: visit: %w", g.Name, err)
			}
		}
	}
	return n, nil
}

func (g *Group) visitPartition(p int32, fn func(key string, value []byte) []*kgo.Record) ([]*kgo.Record, int, error) {
	g.mu.Lock()
	st := g.stores[p]
	g.mu.Unlock()
	if st == nil {
		return nil, 0, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.current {
		return nil, 0, nil // taken away meanwhile
	}
	it, err := st.db.NewIter(nil)
	if err != nil {
		return nil, 0, err
	}
	var out []*kgo.Record
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if internalKey(it.Key()) {
			continue
		}
		n++
		out = append(out, fn(string(it.Key()), it.Value())...)
	}
	return out, n, errors.Join(it.Error(), it.Close())
}
