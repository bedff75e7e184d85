package table

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A View is a read-only copy of a table topic (a group's changelog, or any
// compacted topic) kept up to date in a local Pebble store, with goka's
// View semantics: Get answers from the copy, Ready is closed once the copy
// has read what the topic held when Run started, and Run keeps it reading
// until its context ends. Get and the iterators are safe for concurrent use
// with Run, and answer an error, never a crash, before Run opened the store
// or after it returned.
//
// Its store is StateDir/view/<name>/table: every partition's values in one
// store, so that an iterator sees the whole table in key order, with the
// next offset to read of each partition. It reads committed records only.
type View struct {
	cfg   Config
	topic string
	codec streams.Codec
	name  string
	log   *slog.Logger

	// StaleAfter, if set before Run, is how far behind its topic the view
	// may be and still answer: Get and the iterators answer an error
	// wrapping ErrStale before the view first caught up and while it has
	// not reached, for longer than this, an offset it saw its topic hold.
	// Zero answers whatever the copy holds (the processors' own views,
	// which wait for Ready or Sync themselves).
	StaleAfter time.Duration
	// StuckAfter, if set before Run, ends Run with an error wrapping
	// ErrStuck once a partition behind its topic has not moved for this
	// long (its supervisor starts it again on its store).
	StuckAfter time.Duration

	mu      sync.RWMutex
	db      *pebble.DB
	adm     *kadm.Client
	pos     map[int32]int64 // next offset to read, per partition
	closing bool
	iters   sync.WaitGroup // open iterators: the store closes after them
	// behind, per partition, is the first offset the view saw its topic
	// hold and has not read up to, with when it saw it; moved is when the
	// partition's position last moved.
	behind map[int32]lagMark
	moved  map[int32]time.Time
	// changed is closed, and replaced, whenever a partition's position
	// moves (Changed).
	changed chan struct{}

	ready     chan struct{}
	readyOnce sync.Once

	// ingestAt and ingestChunk, if set, replace ingestAtLeast and
	// ingestChunk (tests).
	ingestAt, ingestChunk int64
}

// ErrStale is what a view with StaleAfter answers while it is too far
// behind its topic; ErrStuck ends a view's Run whose partition stopped
// moving (StuckAfter).
var (
	ErrStale = errors.New("view is behind its topic")
	ErrStuck = errors.New("view stopped reading its topic")
)

// lagMark is an offset a view saw its topic hold at a partition's end, and
// when.
type lagMark struct {
	target int64
	since  time.Time
}

// watchEvery is how often a view lists its topic's ends to know how far
// behind it is.
const watchEvery = time.Second

// NewView returns a view of topic whose values codec decodes; name tells
// the views of one process apart (their stores).
func NewView(cfg Config, topic topics.Table, codec streams.Codec, name string) *View {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &View{cfg: cfg, topic: string(topic), codec: codec, name: name, log: log, ready: make(chan struct{}), changed: make(chan struct{})}
}

// Topic is the topic the view copies.
func (v *View) Topic() string { return v.topic }

// Ready returns a channel closed once the view has read every record the
// topic held when Run started.
func (v *View) Ready() <-chan struct{} { return v.ready }

// viewOffsetKey is where a view's store keeps the next offset to read of
// partition p; it sorts before every printable key.
func viewOffsetKey(p int32) []byte { return []byte("\x00view/next/" + strconv.Itoa(int(p))) }

// viewTopicKey is where a view's store names the topic it copies, so that
// a store says what it is to whoever opens it (a check, an operator).
var viewTopicKey = []byte("\x00view/topic")

// nameTopic writes topic under viewTopicKey, flushed (the store has no
// write-ahead log), unless the store names it already.
func nameTopic(db *pebble.DB, topic string) error {
	if named, err := storedValue(db, viewTopicKey); err != nil || string(named) == topic {
		return err
	}
	return errors.Join(db.Set(viewTopicKey, []byte(topic), pebble.NoSync), db.Flush())
}

// Dir is the view's store.
func (v *View) Dir() string { return filepath.Join(v.cfg.StateDir, "view", v.name, "table") }

// Run copies the topic into the store until ctx ends; it returns nil then,
// or the error that stopped it. It reads through the streams loop, without
// a group, from the offsets its store holds: each partition's part of a
// poll is one store batch with the partition's next offset, and a batch
// the store cannot take stops the view (a record skipped would leave the
// copy wrong for good).
func (v *View) Run(ctx context.Context) error {
	adm := v.cfg.Cluster.Admin()
	ends, err := streams.EndOffsets(ctx, adm, v.topic)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("view of %s: %w", v.topic, err)
	}
	mem := v.cfg.StoreMemory
	if mem <= 0 {
		mem = DefaultStoreMemory
	}
	// The stores of earlier releases (goka's, one per partition) are
	// beside this one: the topic fills the new store.
	_ = os.RemoveAll(filepath.Join(v.cfg.StateDir, "view", v.name, "pebble"))
	db, err := openPebble(v.Dir(), mem, v.cfg.Cache, len(ends), false, v.cfg.Logger)
	if err != nil {
		return fmt.Errorf("view of %s: %w", v.topic, err)
	}
	if err := nameTopic(db, v.topic); err != nil {
		_ = db.Close()
		return fmt.Errorf("view of %s: %w", v.topic, err)
	}
	pos := map[int32]int64{}
	for p := range ends {
		n, _, err := storedInt(db, viewOffsetKey(p))
		if err != nil {
			_ = db.Close()
			return fmt.Errorf("view of %s: the store's offset of partition %d: %w", v.topic, p, err)
		}
		pos[p] = n
	}
	start := time.Now()
	moved := make(map[int32]time.Time, len(pos))
	for p := range pos {
		moved[p] = start
	}
	v.mu.Lock()
	v.db, v.adm, v.pos, v.closing = db, adm, pos, false
	v.behind, v.moved = map[int32]lagMark{}, moved
	v.movedLocked() // the positions its store holds: a wait may be over
	v.mu.Unlock()
	defer v.close()
	if err := v.ingest(ctx, db, pos, ends); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("view of %s: %w", v.topic, err)
	}
	from := map[int32]kgo.Offset{}
	v.mu.RLock()
	for p, n := range v.pos {
		from[p] = kgo.NewOffset().At(n)
	}
	v.mu.RUnlock()
	v.observe(ends, time.Now())
	v.checkReady(ends)
	ctx, stop := context.WithCancelCause(ctx)
	var watching sync.WaitGroup
	defer watching.Wait()
	defer stop(nil) // before the wait: the watch ends with Run
	watching.Go(func() {
		if err := v.watch(ctx, adm); err != nil {
			stop(err)
		}
	})
	err = streams.RunLoop(ctx, streams.LoopConfig{
		Name: "view-" + v.name, Cluster: v.cfg.Cluster, Partitions: map[string]map[int32]kgo.Offset{v.topic: from},
		BatchHandler: func(_ context.Context, b *streams.Batch) error {
			if err := v.apply(b); err != nil {
				return streams.Fatal(fmt.Errorf("view of %s: %w", v.topic, err))
			}
			return nil
		},
		// Past the transaction markers too: a partition that ends with
		// one is read to its end.
		Reached: func(_ string, p int32, next int64) {
			v.reach(p, next)
			v.checkReady(ends)
		},
		Logger: v.log,
	})
	if cause := context.Cause(ctx); errors.Is(cause, ErrStuck) {
		return fmt.Errorf("view of %s: %w", v.topic, cause)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ingest reads the partitions at least ingestAtLeast records behind ends
// (a view onto an empty disk, or one long stopped), from their offsets in
// pos, as sorted tables ingested whole (ingestSorted), writing each
// partition's next offset after every chunk: the view's loop then reads
// from where that ended. The view is not Ready meanwhile (a view with
// StaleAfter answers ErrStale), and its position moves with each chunk.
func (v *View) ingest(ctx context.Context, db *pebble.DB, pos, ends map[int32]int64) error {
	from, end := map[int32]int64{}, map[int32]int64{}
	for p, e := range ends {
		if e-pos[p] >= cmp.Or(v.ingestAt, ingestAtLeast) {
			from[p], end[p] = pos[p], e
		}
	}
	if len(from) == 0 {
		return nil
	}
	started := time.Now()
	n, err := ingestSorted(ctx, sortedIngest{
		cluster: v.cfg.Cluster, db: db, dir: filepath.Join(v.cfg.StateDir, "view", v.name, "ingest"), topic: v.topic,
		from: from, end: end, chunk: v.ingestChunk,
		done: func(b *pebble.Batch, last map[int32]int64) error {
			for p, l := range last {
				if err := b.Set(viewOffsetKey(p), []byte(strconv.FormatInt(l+1, 10)), nil); err != nil {
					return err
				}
			}
			return nil
		},
		committed: func(last map[int32]int64) {
			for p, l := range last {
				v.reach(p, l+1)
			}
		},
		progress: func(done float64, n int64, mbs float64) {
			v.log.Info("view restoring", "view", v.name, "topic", v.topic, "done", fmt.Sprintf("%.0f %%", 100*done),
				"records", n, "MB/s", fmt.Sprintf("%.0f", mbs))
		},
	})
	if err != nil {
		return fmt.Errorf("restore as sorted tables: %w", err)
	}
	v.log.Info("view restored as sorted tables", "view", v.name, "topic", v.topic, "partitions", len(from), "records", n,
		"took", time.Since(started).Round(time.Millisecond))
	return nil
}

// watch lists the topic's ends every watchEvery until ctx ends, to know
// how far behind the view is; it returns an error wrapping ErrStuck when
// a partition behind has not moved for StuckAfter.
func (v *View) watch(ctx context.Context, adm *kadm.Client) error {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// The last stable offsets: a view reads committed records, and
		// an open transaction is not what it is behind.
		listed, err := adm.ListCommittedOffsets(ctx, v.topic)
		if err != nil {
			continue // what it saw before still counts
		}
		ends := map[int32]int64{}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				ends[o.Partition] = o.Offset
			}
		})
		now := time.Now()
		v.observe(ends, now)
		if p, ok := v.stuck(now); ok {
			return fmt.Errorf("%w: partition %d has not moved for %v behind offset %d", ErrStuck, p, v.StuckAfter, ends[p])
		}
	}
}

// observe records the topic's ends as seen at now: a partition that has
// read up to its end is not behind; one still short of an offset it was
// seen to hold before stays behind since then; any other that is short of
// its end is behind since now.
func (v *View) observe(ends map[int32]int64, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.behind == nil {
		return // not running
	}
	for p, end := range ends {
		pos := v.pos[p]
		m, ok := v.behind[p]
		switch {
		case pos >= end:
			delete(v.behind, p)
		case ok && pos < m.target:
		default:
			v.behind[p] = lagMark{target: end, since: now}
		}
	}
}

// stuck returns a partition behind its topic that has not moved for
// StuckAfter.
func (v *View) stuck(now time.Time) (int32, bool) {
	if v.StuckAfter <= 0 {
		return 0, false
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	for p, m := range v.behind {
		if v.pos[p] < m.target && now.Sub(m.since) > v.StuckAfter && now.Sub(v.moved[p]) > v.StuckAfter {
			return p, true
		}
	}
	return 0, false
}

// Staleness returns how long the view has been behind its topic: since it
// first saw the topic hold an offset that one of its partitions has not
// read yet (0: it has read everything it saw). It is the age of the
// oldest write a read from the view may miss, give or take watchEvery.
func (v *View) Staleness() time.Duration {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.stalenessLocked(time.Now())
}

func (v *View) stalenessLocked(now time.Time) time.Duration {
	if _, m, ok := v.oldestLocked(); ok {
		return now.Sub(m.since)
	}
	return 0
}

// oldestLocked returns the partition behind its topic for the longest, and
// its mark; ok is false when none is behind.
func (v *View) oldestLocked() (p int32, m lagMark, ok bool) {
	for q, mq := range v.behind {
		if v.pos[q] < mq.target && (!ok || mq.since.Before(m.since)) {
			p, m, ok = q, mq, true
		}
	}
	return p, m, ok
}

// Fresh returns nil if the view has caught up with its topic since Run
// started and is not behind it for longer than StaleAfter (any length
// when StaleAfter is 0), or an error wrapping ErrStale that says how far
// behind it is.
func (v *View) Fresh() error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.freshLocked()
}

func (v *View) freshLocked() error {
	select {
	case <-v.ready:
	default:
		return fmt.Errorf("view of %s: %w: catching up since it started", v.topic, ErrStale)
	}
	if v.StaleAfter <= 0 {
		return nil
	}
	if p, m, ok := v.oldestLocked(); ok {
		if d := time.Since(m.since); d > v.StaleAfter {
			return fmt.Errorf("view of %s: %w for %v (the bound is %v): partition %d read to offset %d, the topic held %d",
				v.topic, ErrStale, d.Round(time.Millisecond), v.StaleAfter, p, v.pos[p], m.target)
		}
	}
	return nil
}

// readableLocked returns why the view cannot answer a read now: it is not
// running, or it has a bound (StaleAfter) it is past; nil if it can.
func (v *View) readableLocked() error {
	if v.db == nil || v.closing {
		return fmt.Errorf("view of %s: %w", v.topic, errNotRunning)
	}
	if v.StaleAfter > 0 {
		return v.freshLocked()
	}
	return nil
}

// apply writes a partition's batch of records, and the partition's next
// offset, to the store in one batch; Reached, which the loop calls after
// every batch applied, moves the view's position on.
func (v *View) apply(batch *streams.Batch) error {
	b := v.db.NewBatch()
	defer b.Close()
	for _, r := range batch.Records {
		var err error
		if r.Value == nil {
			err = b.Delete(r.Key, nil)
		} else {
			err = b.Set(r.Key, r.Value, nil)
		}
		if err != nil {
			return err
		}
	}
	next := batch.Records[len(batch.Records)-1].Offset + 1
	if err := b.Set(viewOffsetKey(batch.Partition), []byte(strconv.FormatInt(next, 10)), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("write the store: %w", err)
	}
	return nil
}

// reach records that partition p is read up to next.
func (v *View) reach(p int32, next int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if next > v.pos[p] {
		v.pos[p] = next
		v.moved[p] = time.Now()
		v.movedLocked()
	}
}

// movedLocked wakes the readers waiting on Changed: the positions moved.
// Called with v.mu held.
func (v *View) movedLocked() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// Changed returns a channel closed once the view has read further than it
// had when Changed was called: a reader waiting for a value to appear
// takes it before it looks, and looks again when it is closed.
func (v *View) Changed() <-chan struct{} {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.changed
}

func (v *View) checkReady(ends map[int32]int64) {
	if v.caughtUp(ends) {
		v.readyOnce.Do(func() { close(v.ready) })
	}
}

// caughtUp reports whether the view has read every partition of ends up
// to its offset.
func (v *View) caughtUp(ends map[int32]int64) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.pos == nil {
		return false
	}
	for p, end := range ends {
		if v.pos[p] < end {
			return false
		}
	}
	return true
}

// close waits for open iterators and closes the store.
func (v *View) close() {
	v.mu.Lock()
	v.closing = true
	v.mu.Unlock()
	v.iters.Wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := errors.Join(v.db.Flush(), v.db.Close()); err != nil {
		v.log.Error("view: close the store", "view", v.name, "err", err)
	}
	v.db = nil
}

// Get returns key's value decoded, nil if the table holds none.
func (v *View) Get(key string) (any, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if err := v.readableLocked(); err != nil {
		return nil, err
	}
	if internalKey([]byte(key)) {
		return nil, nil
	}
	val, closer, err := v.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", v.topic, err)
	}
	data := bytes.Clone(val)
	_ = closer.Close()
	return v.codec.Decode(data)
}

// WaitFor waits until the view has read every partition of ends up to its
// offset, or ctx ends.
func (v *View) WaitFor(ctx context.Context, ends map[int32]int64) error {
	for {
		changed := v.Changed()
		if v.caughtUp(ends) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("view of %s: behind the offsets waited for: %w", v.topic, ctx.Err())
		case <-changed:
		}
	}
}

// Sync waits until the view shows every record written to its topic before
// the call.
func (v *View) Sync(ctx context.Context) error {
	v.mu.RLock()
	adm := v.adm
	v.mu.RUnlock()
	if adm == nil {
		return fmt.Errorf("view of %s: %w", v.topic, errNotRunning)
	}
	ends, err := streams.EndOffsets(ctx, adm, v.topic)
	if err != nil {
		return err
	}
	return v.WaitFor(ctx, ends)
}

// Iterator returns an iterator over the whole table in key order.
func (v *View) Iterator() (*ViewIterator, error) { return v.IteratorWithRange("", "") }

// IteratorWithRange returns an iterator over the keys from start up to
// limit (excluded; "" for no bound), in key order. Release it.
func (v *View) IteratorWithRange(start, limit string) (*ViewIterator, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if err := v.readableLocked(); err != nil {
		return nil, err
	}
	opts := &pebble.IterOptions{}
	if start != "" {
		opts.LowerBound = []byte(start)
	}
	if limit != "" {
		opts.UpperBound = []byte(limit)
	}
	it, err := v.db.NewIter(opts)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", v.topic, err)
	}
	v.iters.Add(1)
	return &ViewIterator{v: v, it: it}, nil
}

// A ViewIterator walks a view's table in key order; it sees the table as it
// was when it was made.
type ViewIterator struct {
	v        *View
	it       *pebble.Iterator
	started  bool
	released bool
}

// Next moves to the next key; false at the end.
func (i *ViewIterator) Next() bool {
	var ok bool
	if !i.started {
		i.started, ok = true, i.it.First()
	} else {
		ok = i.it.Next()
	}
	for ok && internalKey(i.it.Key()) {
		ok = i.it.Next()
	}
	return ok
}

// Key is the current key.
func (i *ViewIterator) Key() string { return string(i.it.Key()) }

// Value is the current value decoded.
func (i *ViewIterator) Value() (any, error) { return i.v.codec.Decode(bytes.Clone(i.it.Value())) }

// Err is the error that ended the iteration early, if any.
func (i *ViewIterator) Err() error { return i.it.Error() }

// Release frees the iterator; call it once done.
func (i *ViewIterator) Release() {
	if i.released {
		return
	}
	i.released = true
	_ = i.it.Close()
	i.v.iters.Done()
}

// RunView runs view for as long as readers runs; readers' context ends with
// ctx, or when the view fails. It returns both errors.
func RunView(ctx context.Context, view *View, readers func(context.Context) error) error {
	if on := view.cfg.OnView; on != nil {
		defer on(view.name, view)()
	}
	vctx, stopView := context.WithCancel(context.WithoutCancel(ctx))
	defer stopView()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	viewErr := make(chan error, 1)
	go func() {
		err := view.Run(vctx)
		if vctx.Err() != nil {
			err = nil // stopped by RunView
		} else if err == nil {
			err = fmt.Errorf("view of %s: stopped", view.Topic())
		}
		if err != nil {
			cancel()
		}
		viewErr <- err
	}()
	err := readers(rctx)
	stopView()
	return errors.Join(err, <-viewErr)
}
