package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

	"github.com/offerlog/offerlog/internal/table"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// applyChunk is how many timer records are written to the store under one
// hold of its lock.
const applyChunk = 256

// TimersGroup is the timer service's consumer group.
const TimersGroup = "scheduler-timers"

// Timers keeps the pending timers of its partitions of scheduler.timers on
// disk (Pebble, under Dir/pebble: "d/<due>/<key>" in due order,
// "k/<key>" -> due), so that millions of them cost no more than the store's
// share of the memory budget, and fires each due one into its stage's
// queue with an ENQUEUE naming the timer. The aggregate accepts a firing
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
	Memory  int64
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
}

// DefaultTimerMemory is the timer store's memory when Timers names none.
const DefaultTimerMemory = 4 * table.DefaultStoreMemory

func dueKey(due int64, key string) []byte {
	return []byte(fmt.Sprintf("d/%020d/%s", due, key))
}

// prefixRange returns the bounds of the keys that begin with prefix, which
// ends in '/' ('0' follows it).
func prefixRange(prefix string) *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: []byte(prefix[:len(prefix)-1] + "0")}
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
	t.db, err = table.OpenPebble(filepath.Join(t.Dir, "pebble"), mem, true, t.Logger)
	return err
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
	defer t.db.Close()
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
			_ = b.Set(dueKey(c.due, key), []byte(strconv.Itoa(int(c.partition))), nil)
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
			key := string(it.Key()[len("d/")+21:])
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

// fire sends an ENQUEUE for every timer due now and forgets it locally (the
// aggregate's removal from the topic follows). It returns the due time of
// the next timer pending (Unix ms), 0 for none.
func (t *Timers) fire(ctx context.Context) (int64, error) {
	now := t.Now()
	limit := dueKey(now.UnixMilli()+1, "")
	t.mu.Lock()
	it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: []byte("d/"), UpperBound: limit})
	if err != nil {
		t.mu.Unlock()
		return 0, err
	}
	var cmds []*schemas.OfferCommand
	var keys [][]byte
	for ok := it.First(); ok && len(cmds) < 10_000; ok = it.Next() {
		k := string(it.Key())
		due, _ := strconv.ParseInt(k[2:22], 10, 64)
		id, stage, _ := strings.Cut(k[23:], "/")
		cmds = append(cmds, &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, ExpectedVersion: -1, ReadVersion: -1,
			Stage: stage, FiredAt: due})
		keys = append(keys, append([]byte(nil), it.Key()...))
		t.Metrics.Lateness.With(stage).Observe(now.Sub(time.UnixMilli(due)).Seconds())
	}
	err = it.Close()
	t.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if len(cmds) == 0 {
		return t.nextDue(), nil
	}
	if err := offers.SendCommands(ctx, t.Prod, cmds); err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.db.NewBatch()
	defer b.Close()
	removed := 0
	for i, k := range keys {
		if v, err := t.get(k); err != nil {
			return 0, err
		} else if v == nil {
			continue // replaced meanwhile
		}
		_ = b.Delete(k, nil)
		_ = b.Delete([]byte("k/"+cmds[i].OfferID+"/"+cmds[i].Stage), nil)
		removed++
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, err
	}
	t.Metrics.Pending.Add(-float64(removed))
	t.Metrics.Fired.Add(uint64(len(cmds)))
	return t.nextDueLocked(), nil
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
	if !it.First() {
		return 0
	}
	due, _ := strconv.ParseInt(string(it.Key()[2:22]), 10, 64)
	return due
}
