package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
)

// Batch is the records of one partition that one poll returned, handed to a
// BatchHandler in offset order.
type Batch struct {
	Topic     string
	Partition int32
	Records   []*kgo.Record

	dead []deadLetter
}

type deadLetter struct {
	r      *kgo.Record
	reason string
}

// Dead marks r, a record of the batch that can never be handled, for the
// dead-letter topic with the reason. The loop writes the dead letters of a
// batch once its handler returned nil, before the batch's offsets are
// committed; a batch that is tried again forgets the marks of the failed try.
func (b *Batch) Dead(r *kgo.Record, reason string) {
	b.dead = append(b.dead, deadLetter{r: r, reason: reason})
}

// Skip drops the batch's first n records, which its handler knows were
// handled before (a table group's input applied before a crash). The
// marks made with Dead are kept for the loop to write, and the loop still
// commits the whole batch.
func (b *Batch) Skip(n int) { b.Records = b.Records[n:] }

// BatchHandler handles a batch of one partition's records. Its errors mean
// what a Handler's mean; a batch that fails permanently, or whose retries are
// spent, is handled again one record at a time, so that only the records that
// fail on their own are dead-lettered.
type BatchHandler func(ctx context.Context, b *Batch) error

// LoopConfig configures a Loop. Cluster, Topics (or Partitions), one of
// Handler and BatchHandler are required; so is DeadTopic for a loop whose
// records can fail.
type LoopConfig struct {
	// Name names the loop in logs and metrics; default Group.
	Name string
	// Cluster is the cluster the loop reads (and writes dead letters
	// and outputs) through a client of its own.
	Cluster *Cluster
	// Group is the consumer group. Its offsets are committed only for
	// records whose handler returned nil or that were dead-lettered. ""
	// consumes without a group (Partitions, or Topics from Start) and
	// commits nothing.
	Group string
	// Topics are consumed (by the group, or whole without one).
	Topics []string
	// Partitions, without a group, are consumed from the offsets given.
	Partitions map[string]map[int32]kgo.Offset
	// Start is where a group without committed offsets, or a groupless
	// consumer of Topics, starts: default the start of each partition.
	Start *kgo.Offset

	// Handler handles one record at a time per partition, unless
	// Concurrency or Slots say otherwise.
	Handler Handler
	// Concurrency, with Handler, handles up to this many records at once
	// (over all partitions): a slow record occupies one slot, never the
	// records after it. Records of one key are still handled in order, and
	// a record's offset is committed once it and every record before it in
	// its partition are done. 0 or 1: one record at a time per partition.
	Concurrency int
	// Slots, if set, bound the records in flight instead of Concurrency:
	// loops given one Semaphore share its slots (with priorities of its
	// own, if it has them).
	Slots Semaphore
	// BatchHandler handles a partition's records a batch at a time: the
	// polled records waiting when its worker is free, up to
	// MaxPollRecords (a poll larger than that whole).
	BatchHandler BatchHandler
	// Middleware wraps Handler, outermost first, inside the loop's own
	// retry, timeout and recovery (it runs on every attempt).
	Middleware []Middleware

	// DeadTopic receives the records that fail permanently or too often,
	// as bounded dead letters. Without one such records are logged and
	// skipped (only for loops that read, never for those that decide).
	DeadTopic string
	// Producer writes the dead letters; default the loop's own client.
	Producer SyncProducer
	// Backoff is how a failing record (or batch) is retried; the zero
	// value is DefaultBackoff.
	Backoff Backoff
	// Timeout bounds one call of the handler (0: none).
	Timeout time.Duration
	// Queue is how many polled batches a partition's worker may have
	// waiting before its partition is paused (back-pressure); default 2.
	Queue int
	// MaxPollRecords bounds one poll; default 10 000.
	MaxPollRecords int
	// CommitInterval is how often the offsets of handled records are
	// committed; default 500 ms, at least 100 ms. They are committed on every revocation
	// and on shutdown too.
	CommitInterval time.Duration
	// ClientOptions are added last to the client's options.
	ClientOptions []kgo.Opt
	// OnAssigned, if set, is called with the partitions given to this
	// member once their workers started. It runs in the group's management
	// and must not block: work it starts is its caller's to own.
	OnAssigned func(map[string][]int32)
	// OnRevoked, if set, is called with the partitions taken from this
	// member after their workers stopped and their offsets were committed,
	// while they are still this member's (the rebalance waits for it); not
	// on shutdown. Lost partitions too, unless OnLost is set.
	OnRevoked func(map[string][]int32)
	// Reached, if set, is called in a partition's worker once the records
	// of a polled batch are done (handled, dead-lettered or skipped), with
	// the offset after the last of them, transaction markers included: a
	// loop without a group, which commits nothing, learns how far it read,
	// past the markers that end a partition (a table's view). Not with
	// Concurrency or Slots.
	Reached func(topic string, partition int32, next int64)
	// OnLost, if set, is called instead of OnRevoked with the partitions
	// this member lost (its session ended: another member may hold them
	// already, and nothing may be written for them) after their workers
	// stopped.
	OnLost func(map[string][]int32)
	// OnClient, if set, is called with the loop's client once it is made,
	// for what a user of the loop asks of it besides consuming (a
	// metadata refresh: ForceMetadataRefresh); the loop owns and closes it.
	OnClient func(*kgo.Client)

	Metrics *LoopMetrics
	Logger  *slog.Logger
}

func (c *LoopConfig) setDefaults() {
	if c.Name == "" {
		c.Name = c.Group
	}
	if c.Queue <= 0 {
		c.Queue = 2
	}
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = 10_000
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Backoff == (Backoff{}) {
		c.Backoff = DefaultBackoff
	}
}

// Validate returns every problem of c joined, or nil.
func (c *LoopConfig) Validate() error {
	var errs []error
	if c.Cluster == nil {
		errs = append(errs, errors.New("no cluster"))
	}
	if len(c.Topics) == 0 && len(c.Partitions) == 0 {
		errs = append(errs, errors.New("no topics or partitions"))
	}
	if c.Group != "" && len(c.Partitions) > 0 {
		errs = append(errs, errors.New("a group consumes topics, not given partitions"))
	}
	if c.CommitInterval != 0 && c.CommitInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("commit interval %v: want at least 100ms (franz-go's minimum)", c.CommitInterval))
	}
	if (c.Handler == nil) == (c.BatchHandler == nil) {
		errs = append(errs, errors.New("want exactly one of Handler and BatchHandler"))
	}
	if (c.Concurrency > 1 || c.Slots != nil) && c.Handler == nil {
		errs = append(errs, errors.New("concurrency is for a Handler, not a BatchHandler"))
	}
	if (c.Concurrency > 1 || c.Slots != nil) && c.Reached != nil {
		errs = append(errs, errors.New("a loop that reports how far it read (Reached) handles a partition's records in order, not concurrently"))
	}
	if c.Name == "" {
		errs = append(errs, errors.New("no name"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streams loop %s: %w", c.Name, err)
	}
	return nil
}

// LoopMetrics are the loops' metrics. Safe for concurrent use.
type LoopMetrics struct {
	// Records counts records by loop and outcome: handled, dead (written
	// to the dead-letter topic), skipped (failed, no dead-letter topic).
	Records *metrics.CounterVec
	// Retries counts failed calls that were tried again, by loop.
	Retries *metrics.CounterVec
	// Seconds times the handling of a batch or record, by loop.
	Seconds *metrics.HistogramVec
	// Paused counts partitions paused for back-pressure, by loop.
	Paused *metrics.CounterVec
}

// NewLoopMetrics registers the loops' metrics in r (once per registry:
// registering again returns the same families).
func NewLoopMetrics(r *metrics.Registry) *LoopMetrics {
	return &LoopMetrics{
		Records: r.Counter("offerlog_loop_records_total", "Records the consume loops finished with, by loop and outcome (handled, dead, skipped).", "loop", "outcome"),
		Retries: r.Counter("offerlog_loop_retries_total", "Failed handler calls that were tried again, by loop.", "loop"),
		Seconds: r.Histogram("offerlog_loop_handle_seconds", "Time to handle one batch (or record) of a partition, retries included.", metrics.LatencyBuckets, "loop"),
		Paused:  r.Counter("offerlog_loop_paused_total", "Times a partition was paused because its worker was behind, by loop.", "loop"),
	}
}

// Loop is the one way offerlog consumes (table groups included): a client
// (of a consumer group, or of given partitions), a goroutine per partition
// that hands its records in order to the handler with retries, timeouts and
// recovery, dead letters for what cannot be handled, pausing of partitions
// whose worker is behind, and commits of exactly what was handled.
type Loop struct {
	cfg     LoopConfig
	handler Handler
	slots   Semaphore // nil: one record at a time per partition
	runners *runners  // a concurrent loop's, for its Run

	mu        sync.Mutex
	workers   map[tp]*worker
	runCancel context.CancelCauseFunc // stops Run with the failure as its cause
}

type tp struct {
	topic     string
	partition int32
}

// NewLoop checks cfg and returns a loop; Run starts it.
func NewLoop(cfg LoopConfig) (*Loop, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Loop{cfg: cfg, workers: map[tp]*worker{}}
	if cfg.Handler != nil {
		l.handler = Chain(cfg.Handler, cfg.Middleware...)
	}
	switch {
	case cfg.Slots != nil:
		l.slots = cfg.Slots
	case cfg.Concurrency > 1:
		l.slots = NewSlots(cfg.Concurrency)
	}
	return l, nil
}

// RunLoop is NewLoop(cfg) then Run(ctx).
func RunLoop(ctx context.Context, cfg LoopConfig) error {
	l, err := NewLoop(cfg)
	if err != nil {
		return err
	}
	return l.Run(ctx)
}

// try calls fn with the loop's timeout and panic recovery, and again with
// its backoff while it fails with an error neither permanent nor fatal; at is
// the (first) record fn handles, for the log.
func (l *Loop) try(ctx context.Context, at *kgo.Record, fn func(context.Context) error) error {
	onRetry := func(_ int, err error) {
		if l.cfg.Metrics != nil {
			l.cfg.Metrics.Retries.With(l.cfg.Name).Inc()
		}
		l.cfg.Logger.Warn("handler failed, retrying", "loop", l.cfg.Name, "topic", at.Topic, "partition", at.Partition, "offset", at.Offset, "err", err)
	}
	return retry(ctx, l.cfg.Backoff, onRetry, func(ctx context.Context) error {
		return withTimeout(ctx, l.cfg.Timeout, func(ctx context.Context) error { return recovered(ctx, fn) })
	})
}

func (l *Loop) count(outcome string, n int) {
	if l.cfg.Metrics != nil && n > 0 {
		l.cfg.Metrics.Records.With(l.cfg.Name, outcome).Add(uint64(n))
	}
}

func (l *Loop) clientOptions() []kgo.Opt {
	start := kgo.NewOffset().AtStart()
	if l.cfg.Start != nil {
		start = *l.cfg.Start
	}
	opts := l.cfg.Cluster.Options()
	opts = append(opts, kgo.ClientID("offerlog-"+l.cfg.Name),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(start))
	switch {
	case l.cfg.Group != "":
		// A member killed without leaving holds its partitions until its
		// session expires: 10 s, not franz-go's 45 s, bounds how long a
		// restart waits for its dead predecessor (a rebalance waits for the
		// members to finish their batches, at most 30 s).
		opts = append(opts, kgo.ConsumerGroup(l.cfg.Group), kgo.ConsumeTopics(l.cfg.Topics...),
			kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second), kgo.RebalanceTimeout(30*time.Second),
			kgo.BlockRebalanceOnPoll(), kgo.AutoCommitMarks(), kgo.AutoCommitInterval(l.cfg.CommitInterval),
			kgo.OnPartitionsAssigned(l.assigned), kgo.OnPartitionsRevoked(l.revoked), kgo.OnPartitionsLost(l.lost))
		if id := l.cfg.Cluster.Settings().InstanceID; id != "" {
			opts = append(opts, kgo.InstanceID(id))
		}
	case len(l.cfg.Partitions) > 0:
		opts = append(opts, kgo.ConsumePartitions(l.cfg.Partitions))
	default:
		opts = append(opts, kgo.ConsumeTopics(l.cfg.Topics...))
	}
	return append(opts, l.cfg.ClientOptions...)
}

// Run consumes until ctx is done and returns nil, or until a handler failed
// fatally (or dead letters could not be written) and returns that error.
// Handled records are committed before it returns. Run may be called once.
func (l *Loop) Run(parent context.Context) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	l.mu.Lock()
	l.runCancel = cancel
	l.mu.Unlock()
	if l.slots != nil {
		l.runners = newRunners()
		defer l.runners.close() // after the workers stopped, below
	}
	cl, err := kgo.NewClient(l.clientOptions()...)
	if err != nil {
		return fmt.Errorf("%s: %w", l.cfg.Name, err)
	}
	if l.cfg.OnClient != nil {
		l.cfg.OnClient(cl)
	}
	defer func() {
		l.stop(nil)
		if l.cfg.Group != "" {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := cl.CommitMarkedOffsets(cctx); err != nil {
				l.cfg.Logger.Warn("commit on shutdown failed", "loop", l.cfg.Name, "err", err)
			}
			ccancel()
			cl.AllowRebalance()
		}
		cl.Close()
	}()
	for {
		fs := cl.PollRecords(ctx, l.cfg.MaxPollRecords)
		if ctx.Err() != nil {
			if parent.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", l.cfg.Name, context.Cause(ctx))
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				l.cfg.Logger.Warn("fetch failed", "loop", l.cfg.Name, "topic", t, "partition", p, "err", err)
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			w := l.worker(cl, p.Topic, p.Partition)
			if w == nil {
				return // revoked meanwhile: its new owner reads these again
			}
			// Never wait for a worker: a partition paused may still bring
			// the records fetched before (franz-go#489); they wait in its
			// backlog, and the other partitions go on.
			if paused := w.push(p.Records); paused && l.cfg.Metrics != nil {
				l.cfg.Metrics.Paused.With(l.cfg.Name).Inc()
			}
		})
		if l.cfg.Group != "" {
			cl.AllowRebalance()
		}
	}
}

// fail stops Run with err: its poll returns, it stops the workers and
// returns the first failure.
func (l *Loop) fail(err error) {
	l.cfg.Logger.Error("consume loop stopping", "loop", l.cfg.Name, "err", err)
	l.mu.Lock()
	stop := l.runCancel
	l.mu.Unlock()
	stop(err)
}

// worker returns the worker of a partition: created on first use without a
// group, on assignment with one (nil when not assigned).
func (l *Loop) worker(cl *kgo.Client, topic string, partition int32) *worker {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := tp{topic, partition}
	if w, ok := l.workers[k]; ok {
		return w
	}
	if l.cfg.Group != "" {
		return nil
	}
	return l.startLocked(cl, k)
}

// startLocked starts a partition's worker. Its context is its own, ended by
// stop (on revocation and when Run returns).
func (l *Loop) startLocked(cl *kgo.Client, k tp) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{tp: k, cl: cl, queue: make(chan []*kgo.Record, l.cfg.Queue), wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	if l.slots != nil {
		w.flights = newFlights()
	}
	l.workers[k] = w
	go func() {
		defer close(w.done)
		l.work(ctx, w)
		if w.flights != nil {
			w.flights.wg.Wait() // nothing marks its partition after it stopped
		}
	}()
	return w
}

func (l *Loop) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	l.mu.Lock()
	for t, ps := range assigned {
		for _, p := range ps {
			if _, ok := l.workers[tp{t, p}]; !ok {
				l.startLocked(cl, tp{t, p})
			}
		}
	}
	l.mu.Unlock()
	if l.cfg.OnAssigned != nil {
		l.cfg.OnAssigned(assigned)
	}
}

// stop stops the workers of the partitions given (all when nil) and waits
// for them; it resumes those partitions, in case they come back.
func (l *Loop) stop(ps map[string][]int32) {
	l.mu.Lock()
	var stopped []*worker
	for k, w := range l.workers {
		if ps != nil && !contains(ps[k.topic], k.partition) {
			continue
		}
		w.cancel()
		stopped = append(stopped, w)
		delete(l.workers, k)
	}
	l.mu.Unlock()
	for _, w := range stopped {
		<-w.done
		w.mu.Lock()
		if w.paused {
			w.cl.ResumeFetchPartitions(map[string][]int32{w.topic: {w.partition}})
		}
		w.mu.Unlock()
	}
}

func contains(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func (l *Loop) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	l.stop(revoked)
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		l.cfg.Logger.Warn("commit on revocation failed", "loop", l.cfg.Name, "err", err)
	}
	if l.cfg.OnRevoked != nil && ctx.Err() == nil {
		l.cfg.OnRevoked(revoked)
	}
}

func (l *Loop) lost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	l.stop(lost) // nothing to commit: the partitions are someone else's now
	switch {
	case ctx.Err() != nil:
	case l.cfg.OnLost != nil:
		l.cfg.OnLost(lost)
	case l.cfg.OnRevoked != nil:
		l.cfg.OnRevoked(lost)
	}
}

type worker struct {
	tp
	cl    *kgo.Client
	queue chan []*kgo.Record
	// backlog holds, in order, what came while the queue was full (the
	// partition is paused then: at most the fetches already made); wake
	// tells the worker it grew. held is a batch taken but left for the
	// next (next's bound), older than both. Pausing and resuming happen
	// under mu, with the queue's state they follow.
	mu      sync.Mutex
	backlog [][]*kgo.Record
	held    []*kgo.Record
	wake    chan struct{}
	paused  bool
	cancel  context.CancelFunc
	done    chan struct{}
	// flights are the records in flight of a concurrent loop.
	flights *flights
}

// push hands recs to the worker without waiting, and pauses the partition
// once the worker's queue is full; it reports whether it paused it.
func (w *worker) push(recs []*kgo.Record) (paused bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	queued := false
	if len(w.backlog) == 0 {
		select {
		case w.queue <- recs:
			queued = true
		default:
		}
	}
	if !queued {
		w.backlog = append(w.backlog, recs)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	if w.paused || (queued && len(w.queue) < cap(w.queue)) {
		return false
	}
	w.paused = true
	w.cl.PauseFetchPartitions(map[string][]int32{w.topic: {w.partition}})
	return true
}

// resumeIfRoomy resumes the partition if it is paused and the worker can
// take more: nothing waits in its backlog and its queue is not full.
func (w *worker) resumeIfRoomy() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused && len(w.backlog) == 0 && len(w.queue) < cap(w.queue) {
		w.paused = false
		w.cl.ResumeFetchPartitions(map[string][]int32{w.topic: {w.partition}})
	}
}

// next returns the partition's next batch, in order (the queue holds the
// older ones), or false once ctx ends: every record waiting for the worker
// when it asks, up to max (at least one polled batch whole), its offsets
// growing. A partition whose worker was busy (a table group's batch waits
// for its produce round trips) has its waiting polls handled as one batch,
// so that their records share one commit: group commit, not one commit
// per poll.
func (w *worker) next(ctx context.Context, max int) ([]*kgo.Record, bool) {
	for {
		if recs := w.take(nil, max); recs != nil {
			return recs, true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case recs := <-w.queue:
			return w.take(recs, max), true
		case <-w.wake:
		}
	}
}

// take returns recs (the oldest batch waiting when nil; nil if none) with
// the batches waiting after it appended, up to max, while their offsets
// grow; the first that would cross max, or starts further back (the
// client's position was reset), is held as the next batch's start, so
// that a batch's offsets only grow (a table group skips a batch's prefix
// it has applied, not a middle).
func (w *worker) take(recs []*kgo.Record, max int) []*kgo.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	if recs == nil {
		if recs = w.pop(); recs == nil {
			return nil
		}
	}
	recs = slices.Clip(recs) // the poll's slice is not ours to grow into
	for len(recs) < max {
		next := w.pop()
		if next == nil {
			break
		}
		if len(recs)+len(next) > max || next[0].Offset <= recs[len(recs)-1].Offset {
			w.held = next
			break
		}
		recs = append(recs, next...)
	}
	return recs
}

// pop removes and returns the oldest batch waiting (the one held back by
// the last merge, the queue's, then the backlog's), nil if none. Called
// with mu held.
func (w *worker) pop() []*kgo.Record {
	if recs := w.held; recs != nil {
		w.held = nil
		return recs
	}
	select {
	case recs := <-w.queue:
		return recs
	default:
	}
	if len(w.backlog) > 0 {
		recs := w.backlog[0]
		w.backlog[0] = nil
		w.backlog = w.backlog[1:]
		return recs
	}
	return nil
}

// work handles the partition's batches in order until ctx ends.
func (l *Loop) work(ctx context.Context, w *worker) {
	for {
		recs, ok := w.next(ctx, l.cfg.MaxPollRecords)
		if !ok {
			return
		}
		start := time.Now()
		err := l.handle(ctx, w, recs)
		if l.cfg.Metrics != nil {
			l.cfg.Metrics.Seconds.With(l.cfg.Name).Observe(time.Since(start).Seconds())
		}
		if err != nil {
			if ctx.Err() == nil {
				l.fail(err)
			}
			return // not marked: read again after the restart
		}
		w.resumeIfRoomy()
	}
}

// handle handles recs of one partition: every record is handled or
// dead-lettered when it returns nil; an error is fatal (or ctx's).
//
// Transaction markers (control records, which the client keeps) are never
// handed to handlers; a marker that ends recs is marked for commit once
// the records before it are done, so that a group reading a topic written
// in transactions commits up to its end offset (franz-go would otherwise
// commit the offset after the last data record, one short of the end, and
// whoever waits for the group to reach the end would wait for ever).
func (l *Loop) handle(ctx context.Context, w *worker, recs []*kgo.Record) error {
	if l.slots != nil {
		// Marks follow the finished prefix there, markers included.
		return l.handleConcurrent(ctx, w, recs)
	}
	last := recs[len(recs)-1]
	if recs = dataRecords(recs); len(recs) == 0 {
		l.done(w, last)
		l.reached(w, last)
		return nil
	}
	var err error
	switch {
	case l.cfg.BatchHandler != nil:
		err = l.handleBatch(ctx, w, recs)
	default:
		for _, r := range recs {
			if err = l.one(ctx, w, r); err != nil {
				return err
			}
			l.done(w, r)
		}
	}
	if err == nil && last.Attrs.IsControl() {
		l.done(w, last)
	}
	if err == nil {
		l.reached(w, last)
	}
	return err
}

// reached tells LoopConfig.Reached that w's partition is done up to r.
func (l *Loop) reached(w *worker, r *kgo.Record) {
	if l.cfg.Reached != nil {
		l.cfg.Reached(w.topic, w.partition, r.Offset+1)
	}
}

// dataRecords returns recs without transaction markers (recs itself when
// it has none).
func dataRecords(recs []*kgo.Record) []*kgo.Record {
	if !slices.ContainsFunc(recs, func(r *kgo.Record) bool { return r.Attrs.IsControl() }) {
		return recs
	}
	return slices.DeleteFunc(slices.Clone(recs), func(r *kgo.Record) bool { return r.Attrs.IsControl() })
}

// done marks r, and every record before it in its partition, for commit.
func (l *Loop) done(w *worker, r *kgo.Record) {
	if l.cfg.Group != "" {
		w.cl.MarkCommitRecords(r)
	}
}

func (l *Loop) handleBatch(ctx context.Context, w *worker, recs []*kgo.Record) error {
	var b *Batch
	err := l.try(ctx, recs[0], func(ctx context.Context) error {
		b = &Batch{Topic: w.topic, Partition: w.partition, Records: recs}
		return l.cfg.BatchHandler(ctx, b)
	})
	switch {
	case err == nil:
		for _, d := range b.dead {
			if err := l.dead(ctx, w, d.r, d.reason); err != nil {
				return err
			}
		}
		l.count("handled", len(recs)-len(b.dead))
		l.done(w, recs[len(recs)-1])
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case IsFatal(err):
		return err
	case len(recs) > 1:
		// Find the records at fault: each alone.
		for _, r := range recs {
			if err := l.handleBatch(ctx, w, []*kgo.Record{r}); err != nil {
				return err
			}
		}
		return nil
	default:
		if err := l.dead(ctx, w, recs[0], reason(err)); err != nil {
			return err
		}
		l.done(w, recs[0])
		return nil
	}
}

func reason(err error) string {
	var p *PermanentError
	if errors.As(err, &p) {
		return p.Err.Error()
	}
	return err.Error()
}

// dead writes r's dead letter, retrying until it is written or ctx ends.
func (l *Loop) dead(ctx context.Context, w *worker, r *kgo.Record, why string) error {
	if l.cfg.DeadTopic == "" {
		l.count("skipped", 1)
		l.cfg.Logger.Warn("record skipped", "loop", l.cfg.Name, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", why)
		return nil
	}
	rec, err := DeadLetterRecord(l.cfg.DeadTopic, l.cfg.Name, r, why)
	if err != nil {
		return Fatal(fmt.Errorf("build dead letter: %w", err))
	}
	err = retry(ctx, Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, func(_ int, err error) {
		l.cfg.Logger.Warn("dead letter not written, retrying", "loop", l.cfg.Name, "topic", l.cfg.DeadTopic, "err", err)
	}, func(ctx context.Context) error {
		var p SyncProducer = w.cl
		if l.cfg.Producer != nil {
			p = l.cfg.Producer
		}
		return p.ProduceSync(ctx, rec).FirstErr()
	})
	if err != nil {
		return err
	}
	l.count("dead", 1)
	l.cfg.Logger.Warn("record dead-lettered", "loop", l.cfg.Name, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", why)
	return nil
}
