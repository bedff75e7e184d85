package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// applyChunk is how many timer records are written to the store under one
// hold of its lock.
const applyChunk = 256

// TimersGroup is the timer service's consumer group.
const TimersGroup = "scheduler-timers"

// Timers keeps the pending timers of its partitions of scheduler.timers on
// disk (Pebble, under Dir/pebble: "d/<stage>/<due>/<key>", each stage's in
// due order, "k/<key>" -> due), so that millions of them cost no more than
// the store's share of the memory budget, and fires each due one into its
// stage's queue with an ENQUEUE naming the timer. It fires in rounds that
// take at most fireQuota due timers of each stage, so that a burst of one
// stage (a million timers due in the same second) delays another stage's
// timers by a round, not by the burst. The aggregate accepts a firing
// only for the stage's pending timer and then removes it from the topic, so
// a timer fired twice (after a crash between the firing and the removal)
// changes nothing; the aggregate counts it.
//
// The topic is the truth, the store a copy that remembers, per partition,
// the offset it applied up to ("o/<partition>"): a restart on the same disk
// resumes there, a partition new to the store is read from its start, and
// a partition taken away is dropped from the store. The group's committed
// offsets are only what the client hands to resume; the store decides.
type Timers struct {
	Cluster *streams.Cluster
	Dir     string
	// Memory is what the store may take for its memtables and its share
	// of the block cache (default DefaultTimerMemory).
	Memory int64
	// Cache is the block cache the process's stores share
	// (table.Config.Cache; nil: the store's own).
	Cache   *table.BlockCache
	Prod    *kgo.Client
	Metrics *Metrics
	Logger  *slog.Logger
	// Tick is the wait before firing is tried again after it failed
	// (default 200 ms). Otherwise the service sleeps until the next due
	// timer, or a new earlier one, or a second at most.
	Tick time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu       sync.Mutex
	db       *pebble.DB
	stopping atomic.Bool
	// next is the due time (Unix ms) the firing loop sleeps until, 0 for
	// none; apply wakes it for an earlier timer.
	next atomic.Int64
	wake chan struct{}
	// from is, for each stage with timers in the store, the index key its
	// firing starts at: every key of the stage before it has fired and is
	// deleted. Iterating from the start of the stage's index would step
	// over the tombstones of every timer fired before (a burst of a
	// million made that most of the firing's CPU). apply lowers it for a
	// timer inserted before it. Under mu.
	from map[string][]byte
	// changed, while a firing is in flight (non-nil from due to forget),
	// holds the timer keys apply wrote meanwhile: forget leaves those
	// alone. Under mu.
	changed map[string]struct{}
	// inserted, while a firing is in flight, holds each stage's lowest
	// index key apply wrote meanwhile: forget starts the stage's next
	// firing there if it is before the last timer fired. A timer applied
	// late (already due: a restarted service reading its backlog while it
	// fires, a router behind) falls inside the range being fired, and
	// moving from past that range skipped it for good. Under mu.
	inserted map[string][]byte
}

// DefaultTimerMemory is the timer store's memory when Timers names none.
const DefaultTimerMemory = 4 * table.DefaultStoreMemory

// fireQuota is how many due timers of one stage a firing round takes.
const fireQuota = 2000

// storeVersion is the layout of the store: a store of another layout is
// removed and the topic read again from its start.
const storeVersion = "2"

// dueKey is the index key of the timer key (<offer id>/<stage>) due at due
// (Unix ms): "d/<stage>/<due, 20 digits>/<key>".
func dueKey(due int64, key string) []byte {
	stage := stageOfKey(key)
	b := make([]byte, 0, len("d/")+len(stage)+22+len(key))
	b = append(append(append(b, "d/"...), stage...), '/')
	var digits [20]byte
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + due%10)
		due /= 10
	}
	b = append(append(b, digits[:]...), '/')
	return append(b, key...)
}

// stageOfKey returns the stage of a timer key, <offer id>/<stage> (a
// stage's name has no '/').
func stageOfKey(key string) string {
	return key[strings.LastIndexByte(key, '/')+1:]
}

// parseDueKey returns the due time and the timer key of an index key.
func parseDueKey(k []byte) (due int64, key string) {
	rest := k[len("d/"):]
	rest = rest[bytes.IndexByte(rest, '/')+1:] // the stage
	due, _ = strconv.ParseInt(string(rest[:20]), 10, 64)
	return due, string(rest[21:])
}

// prefixRange returns the bounds of the keys that begin with prefix, which
// ends in '/' ('0' follows it).
func prefixRange(prefix string) *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: []byte(prefix[:len(prefix)-1] + "0")}
}

// stages fills from with the start of each stage's index in the store.
func (t *Timers) stages() error {
	it, err := t.db.NewIter(prefixRange("d/"))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; {
		_, key := parseDueKey(it.Key())
		stage := stageOfKey(key)
		t.from[stage] = []byte("d/" + stage + "/")
		ok = it.SeekGE([]byte("d/" + stage + "0"))
	}
	return it.Close()
}

// get returns the value of key, nil if the store has none.
func (t *Timers) get(key []byte) ([]byte, error) {
	v, closer, err := t.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// open opens the store under Dir/pebble. The stores of earlier releases
// were LevelDB's, in Dir itself: they are removed, and the service reads
// the topic again from its start (the store decides where to resume).
func (t *Timers) open() error {
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(t.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != "pebble" {
			if err := os.RemoveAll(filepath.Join(t.Dir, e.Name())); err != nil {
				return err
			}
		}
	}
	mem := t.Memory
	if mem <= 0 {
		mem = DefaultTimerMemory
	}
	// With its write-ahead log: the store is its own record of what it
	// read and fired.
	path := filepath.Join(t.Dir, "pebble")
	if t.db, err = table.OpenPebble(path, mem, t.Cache, true, t.Logger); err != nil {
		return err
	}
	t.from = map[string][]byte{}
	v, err := t.get([]byte("v"))
	if err != nil {
		return err
	}
	if string(v) == storeVersion {
		return t.stages()
	}
	// A store of the layout before the stages' own indexes (or a new one):
	// read the topic again from its start into a new store.
	if err := t.db.Close(); err != nil {
		return err
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	if t.db, err = table.OpenPebble(path, mem, t.Cache, true, t.Logger); err != nil {
		return err
	}
	return t.db.Set([]byte("v"), []byte(storeVersion), pebble.Sync)
}

// Run keeps and fires timers until ctx is done.
func (t *Timers) Run(ctx context.Context) error {
	if t.Tick <= 0 {
		t.Tick = 200 * time.Millisecond
	}
	if t.Now == nil {
		t.Now = time.Now
	}
	t.wake = make(chan struct{}, 1)
	if err := t.open(); err != nil {
		return fmt.Errorf("timers: %w", err)
	}
	defer func() { _ = t.db.Close() }()
	if err := t.count(); err != nil {
		return fmt.Errorf("timers: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Leaving the group on shutdown revokes everything: keep the store.
	stop := context.AfterFunc(ctx, func() { t.stopping.Store(true) })
	defer stop()
	fired := make(chan error, 1)
	go func() { fired <- t.fireLoop(ctx) }()
	err := streams.RunLoop(ctx, streams.LoopConfig{Cluster: t.Cluster, Group: TimersGroup, Topics: []string{topics.SchedulerTimers},
		Logger: t.Logger, Metrics: t.Metrics.Loop, OnRevoked: t.drop,
		// Positions come from the store: the group's committed offsets
		// only make the group hand the partitions to resume.
		ClientOptions: []kgo.Opt{kgo.AdjustFetchOffsetsFn(t.resume)},
		BatchHandler: func(_ context.Context, b *streams.Batch) error {
			// In chunks, each with its position: the firing loop, which
			// shares the store's lock, waits for one chunk at most.
			for recs := b.Records; len(recs) > 0; {
				n := min(len(recs), applyChunk)
				t.mu.Lock()
				err := t.apply(recs[:n])
				t.mu.Unlock()
				if err != nil {
					return streams.Fatal(fmt.Errorf("timers: store write: %w", err))
				}
				recs = recs[n:]
			}
			return nil
		}})
	cancel()
	return errors.Join(err, <-fired)
}

// count sets the pending gauge from the store.
func (t *Timers) count() error {
	it, err := t.db.NewIter(prefixRange("k/"))
	if err != nil {
		return err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	t.Metrics.Pending.Set(float64(n))
	return it.Close()
}

// resume starts each assigned partition where the store left it, or at its
// start when the store has none of it.
func (t *Timers) resume(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for p := range offsets[topics.SchedulerTimers] {
		o := kgo.NewOffset().AtStart()
		v, err := t.get([]byte("o/" + strconv.Itoa(int(p))))
		if err != nil {
			return nil, err
		}
		if v != nil {
			at, _ := strconv.ParseInt(string(v), 10, 64)
			o = kgo.NewOffset().At(at)
		}
		offsets[topics.SchedulerTimers][p] = o
	}
	return offsets, nil
}

// apply writes a poll's timers to the store in one batch, with each
// partition's new position: the last record of a key wins, a tombstone (or
// a timer without a time) removes it.
func (t *Timers) apply(recs []*kgo.Record) error {
	type change struct {
		due       int64 // 0: removed
		partition int32
	}
	last := map[string]change{}
	pos := map[int32]int64{}
	earliest := int64(0)
	for _, r := range recs {
		t.Metrics.TimerRecords.Inc()
		pos[r.Partition] = r.Offset + 1
		c := change{partition: r.Partition}
		if r.Value != nil {
			var tm schemas.StageTimer
			if schemas.StageTimers.Decode(r.Value, &tm) == nil && tm.DueAt > 0 {
				c.due = tm.DueAt
			}
		}
		last[string(r.Key)] = c
	}
	if len(pos) == 0 {
		return nil
	}
	b := t.db.NewBatch()
	defer b.Close()
	// The due times being replaced, read in key order through one
	// iterator: a Get per key made a new iterator each time (7 % of the
	// scheduler's CPU). SeekGE, as the store has no Split for SeekPrefixGE.
	keys := make([]string, 0, len(last))
	for key := range last {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	it, err := t.db.NewIter(prefixRange("k/"))
	if err != nil {
		return err
	}
	defer it.Close()
	pending := 0
	for _, key := range keys {
		c := last[key]
		if t.changed != nil {
			t.changed[key] = struct{}{}
		}
		k := []byte("k/" + key)
		var old []byte
		if it.SeekGE(k) && bytes.Equal(it.Key(), k) {
			old = it.Value()
		}
		if err := it.Error(); err != nil {
			return err
		}
		if old != nil {
			due, _ := strconv.ParseInt(string(old), 10, 64)
			_ = b.Delete(dueKey(due, key), nil)
			_ = b.Delete([]byte("k/"+key), nil)
			pending--
		}
		if c.due > 0 {
			if earliest == 0 || c.due < earliest {
				earliest = c.due
			}
			dk := dueKey(c.due, key)
			stage := stageOfKey(key)
			if f, ok := t.from[stage]; !ok || bytes.Compare(dk, f) < 0 {
				t.from[stage] = dk
			}
			if low, ok := t.inserted[stage]; t.inserted != nil && (!ok || bytes.Compare(dk, low) < 0) {
				t.inserted[stage] = dk
			}
			_ = b.Set(dk, []byte(strconv.Itoa(int(c.partition))), nil)
			_ = b.Set([]byte("k/"+key), []byte(strconv.FormatInt(c.due, 10)), nil)
			pending++
		}
	}
	for p, o := range pos {
		_ = b.Set([]byte("o/"+strconv.Itoa(int(p))), []byte(strconv.FormatInt(o, 10)), nil)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	t.Metrics.Pending.Add(float64(pending))
	// Wake the firing loop for an earlier timer (or one added while it
	// was deciding how long to sleep: its next is then in the past).
	if next := t.next.Load(); earliest > 0 && (next == 0 || earliest < next || next <= t.Now().UnixMilli()) {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// drop forgets the timers of partitions taken away by a rebalance (not
// those of a shutdown: the store stays for the restart).
func (t *Timers) drop(lost map[string][]int32) {
	if t.stopping.Load() {
		return
	}
	parts := map[string]bool{}
	for _, p := range lost[topics.SchedulerTimers] {
		parts[strconv.Itoa(int(p))] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	it, err := t.db.NewIter(prefixRange("d/"))
	if err != nil {
		t.Logger.Error("timers: the timers of lost partitions not dropped", "err", err)
		return
	}
	b := t.db.NewBatch()
	defer b.Close()
	dropped := 0
	for ok := it.First(); ok; ok = it.Next() {
		if parts[string(it.Value())] {
			_, key := parseDueKey(it.Key())
			if t.changed != nil {
				t.changed[key] = struct{}{}
			}
			_ = b.Delete(it.Key(), nil) // the batch copies it
			_ = b.Delete([]byte("k/"+key), nil)
			dropped++
		}
	}
	err = it.Close()
	for p := range parts {
		_ = b.Delete([]byte("o/"+p), nil)
	}
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	if err != nil {
		t.Logger.Error("timers: the timers of lost partitions not dropped", "err", err)
		return
	}
	t.Metrics.Pending.Add(-float64(dropped))
}

// fireLoop fires the due timers, then sleeps until the next one is due
// (a timer added earlier wakes it; a second at most), until ctx is done.
func (t *Timers) fireLoop(ctx context.Context) error {
	const idle = time.Second
	for {
		next, err := t.fire(ctx)
		wait := idle
		switch {
		case err != nil:
			if ctx.Err() == nil {
				t.Logger.Warn("timers: firing failed, trying again", "err", err)
			}
			wait = t.Tick
		case next > 0:
			wait = min(idle, time.UnixMilli(next).Sub(t.Now()))
		}
		t.next.Store(next)
		if wait > 0 {
			sleep := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				sleep.Stop()
				return nil
			case <-sleep.C:
			case <-t.wake:
				sleep.Stop()
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// fire sends an ENQUEUE for the timers due now, at most fireQuota of each
// stage, and forgets them locally (the aggregate's removal from the topic
// follows). It returns the due time of the next timer pending (Unix ms), 0
// for none: now again when a stage has more due.
func (t *Timers) fire(ctx context.Context) (int64, error) {
	now := t.Now()
	t.mu.Lock()
	cmds, keys, starts, more, err := t.due(now.UnixMilli())
	t.mu.Unlock()
	if err != nil {
		return 0, err
	}
	for _, c := range cmds {
		t.Metrics.Lateness.With(c.Stage).Observe(now.Sub(time.UnixMilli(c.FiredAt)).Seconds())
	}
	if len(cmds) == 0 {
		return t.nextDue(), nil
	}
	err = offers.SendCommands(ctx, t.Prod, cmds)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.changed, t.inserted = nil, nil
		return 0, err
	}
	removed, err := t.forget(keys, starts)
	if err != nil {
		return 0, err
	}
	t.Metrics.Pending.Add(-float64(removed))
	t.Metrics.Fired.Add(uint64(len(cmds)))
	if more {
		return now.UnixMilli(), nil
	}
	return t.nextDueLocked(), nil
}

// firing is a timer taken to fire: its key, the due time it was taken
// with, and its index key (with room for forget's 0 after it).
type firing struct {
	key string
	due int64
	idx []byte
}

// due returns the ENQUEUEs of the timers due at now (Unix ms), up to
// fireQuota of each stage, where each stage's firing started (its from),
// and whether a stage has more due. The caller holds the lock.
func (t *Timers) due(now int64) (cmds []*schemas.OfferCommand, taken []firing, starts map[string][]byte, more bool, err error) {
	it, err := t.db.NewIter(prefixRange("d/"))
	if err != nil {
		return nil, nil, nil, false, err
	}
	starts = maps.Clone(t.from)
	for stage, from := range t.from {
		prefix := []byte("d/" + stage + "/")
		n := 0
		for ok := it.SeekGE(from); ok && bytes.HasPrefix(it.Key(), prefix); ok = it.Next() {
			due, key := parseDueKey(it.Key())
			if due > now {
				break
			}
			if n == fireQuota {
				more = true
				break
			}
			id := key[:len(key)-len(stage)-1]
			cmds = append(cmds, &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, ExpectedVersion: -1, ReadVersion: -1,
				Stage: stage, FiredAt: due})
			taken = append(taken, firing{key, due, append(make([]byte, 0, len(it.Key())+1), it.Key()...)})
			n++
		}
	}
	if len(cmds) > 0 {
		t.changed, t.inserted = map[string]struct{}{}, map[string][]byte{}
	}
	return cmds, taken, starts, more, it.Close()
}

// forget removes the fired timers from the store, but not one apply wrote
// meanwhile (replaced, or removed), and returns how many it removed.
// starts are where due began each stage's firing. The caller holds the
// lock.
func (t *Timers) forget(fired []firing, starts map[string][]byte) (int, error) {
	changed, inserted := t.changed, t.inserted
	t.changed, t.inserted = nil, nil
	b := t.db.NewBatch()
	defer b.Close()
	removed := 0
	for _, f := range fired {
		if _, ok := changed[f.key]; ok {
			continue // replaced or removed meanwhile: apply deleted the index key
		}
		_ = b.Delete(f.idx, nil)
		_ = b.Delete([]byte("k/"+f.key), nil)
		removed++
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, err
	}
	// Each stage's firing starts after the last timer it fired, unless
	// a timer inserted since due lowered its start (it would be skipped).
	for _, f := range fired {
		stage := stageOfKey(f.key)
		if after := append(f.idx, 0); bytes.Equal(t.from[stage], starts[stage]) && bytes.Compare(after, t.from[stage]) > 0 {
			t.from[stage] = after
			starts[stage] = after
		}
	}
	// Unless apply wrote one meanwhile inside the range fired.
	for stage, low := range inserted {
		if bytes.Compare(low, t.from[stage]) < 0 {
			t.from[stage] = low
		}
	}
	return removed, nil
}

// nextDue returns the due time of the first pending timer (Unix ms), 0 for
// none: the store keeps them in due order.
func (t *Timers) nextDue() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nextDueLocked()
}

func (t *Timers) nextDueLocked() int64 {
	it, err := t.db.NewIter(prefixRange("d/"))
	if err != nil {
		return 0
	}
	defer it.Close()
	// The first of each stage's index.
	next := int64(0)
	for stage, from := range t.from {
		if !it.SeekGE(from) || !bytes.HasPrefix(it.Key(), []byte("d/"+stage+"/")) {
			continue
		}
		if due, _ := parseDueKey(it.Key()); next == 0 || due < next {
			next = due
		}
	}
	return next
}
