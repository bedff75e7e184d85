package indexer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/topics"
)

// Consumer groups of the indexer.
const (
	Group      = "indexer"
	RetryGroup = "indexer-retry"
	// UrgentGroup reads the emergency queue, documents.urgent.
	UrgentGroup = "indexer-urgent"
)

// Lookup returns the registry's current record of a key ("client/pk"), nil
// if it holds none. It must be safe for concurrent use.
type Lookup func(key string) (*schemas.RegistryRecord, error)

// Config of the indexer.
type Config struct {
	// Cluster is the cluster it reads changes from and writes client
	// topics to.
	Cluster *streams.Cluster
	// Partitions and Replication of the client topics the indexer creates
	// when it first sees a client (-1 replication: broker default).
	Partitions  int32
	Replication int16
	// Convert converts changes; nil means Convert.
	Convert Converter
	// Current looks up the registry before a change is delivered to the
	// search feed (indexing.md: a queued change whose version is gone is
	// skipped); nil delivers every change unchecked.
	Current Lookup
	// RetryMin and RetryMax bound the exponential backoff of retries.
	RetryMin, RetryMax time.Duration
	// Framing of saas.<client> and yt.<client>, export topics (default soe).
	Framing schemas.Framing
	Metrics *Metrics
	Logger  *slog.Logger
	// AllowGaps: see replay.Spec.AllowGaps.
	AllowGaps bool
	// replayed is the replay.Header value of a replay's deliveries,
	// nil in a live indexer.
	replayed []byte
}

func (c *Config) setDefaults() {
	if c.Convert == nil {
		c.Convert = Convert
	}
	if c.RetryMin <= 0 {
		c.RetryMin = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Minute
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(metrics.New())
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate returns every problem of c joined, or nil.
func (c *Config) Validate() error {
	var errs []error
	if c.Cluster == nil {
		errs = append(errs, errors.New("indexer: no cluster"))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("indexer: %d partitions", c.Partitions))
	}
	if c.RetryMin > c.RetryMax {
		errs = append(errs, fmt.Errorf("indexer: retry backoff min %s > max %s", c.RetryMin, c.RetryMax))
	}
	return errors.Join(errs...)
}

// Metrics of the indexer.
type Metrics struct {
	Delivered *metrics.CounterVec // by feed: saas, yt
	Failed    *metrics.Counter
	Retried   *metrics.CounterVec // by outcome: delivered, superseded, failed
	// Superseded counts changes of the main queue kept from the search
	// feed because the registry has moved past them (the archive still
	// takes them).
	Superseded *metrics.Counter
	// Loop counts the consume loops' records (dead letters included).
	Loop *streams.LoopMetrics
}

// NewMetrics registers the indexer's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Delivered: r.Counter("offerlog_indexer_delivered_total", "Records delivered to client feeds.", "feed"),
		Failed:    r.Counter("offerlog_indexer_failed_total", "Changes sent to documents.failed.").With(),
		Retried:   r.Counter("offerlog_indexer_retries_total", "Retries of failed changes by outcome.", "outcome"),
		Superseded: r.Counter("offerlog_indexer_superseded_total",
			"Changes of documents.changes not delivered to the search feed: the registry holds a fresher version.").With(),
		Loop: streams.NewLoopMetrics(r),
	}
}

// Run runs the indexer and its retry consumer until ctx is done. It returns
// nil after a clean shutdown, or the first error that stopped either.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	prod, err := cfg.Cluster.Producer(Group, kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return fmt.Errorf("indexer: %w", err)
	}
	defer prod.Close()
	ix := &indexer{cfg: cfg, prod: prod, clients: map[string]bool{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, run := range []func(context.Context) error{ix.runChanges, ix.runRetries, ix.runUrgent} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = run(ctx); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

type indexer struct {
	cfg  Config
	prod *kgo.Client // feeds, failed queue and dead letters (acks=all)

	mu      sync.Mutex
	clients map[string]bool // clients whose topics exist
}

// consume runs the loop of group on topic: handle gets each partition's
// records a batch at a time (streams.LoopConfig.BatchHandler), and its
// offsets are committed once handle returned nil.
func (ix *indexer) consume(ctx context.Context, group, topic string, handle streams.BatchHandler) error {
	return streams.RunLoop(ctx, streams.LoopConfig{Cluster: ix.cfg.Cluster, Group: group, Topics: []string{topic},
		DeadTopic: topics.DocumentsDead, Producer: ix.prod, Logger: ix.cfg.Logger, Metrics: ix.cfg.Metrics.Loop,
		Backoff: streams.Backoff{Initial: ix.cfg.RetryMin, Max: ix.cfg.RetryMax}, BatchHandler: handle})
}

func (ix *indexer) runChanges(ctx context.Context) error {
	return ix.consume(ctx, Group, topics.DocumentsChanges, func(ctx context.Context, b *streams.Batch) error {
		jobs, err := ix.current(b, true)
		if err != nil {
			return err
		}
		failed, err := ix.deliver(ctx, ix.prod, jobs)
		if err != nil {
			return err
		}
		return produceAll(ctx, ix.prod, failed)
	})
}

// runUrgent delivers the emergency queue to the search feed on a lane of
// its own. The same changes come on documents.changes too, which archives
// them and delivers them again (the same version: the feed is unchanged),
// so an urgent delivery that fails is left to the main queue.
func (ix *indexer) runUrgent(ctx context.Context) error {
	return ix.consume(ctx, UrgentGroup, topics.DocumentsUrgent, func(ctx context.Context, b *streams.Batch) error {
		jobs, err := ix.current(b, false)
		if err != nil {
			return err
		}
		failed, err := ix.deliver(ctx, ix.prod, jobs)
		if len(failed) > 0 {
			ix.cfg.Logger.Warn("indexer: urgent deliveries failed; the main queue delivers them", "failed", len(failed))
		}
		return err
	})
}

// current decodes the changes of b (the undecodable are dead-lettered)
// into jobs that deliver to the search feed only what is current: a change
// followed by another of its key in the batch is superseded, and so is one
// the registry has moved past. archive says whether each is archived too.
func (ix *indexer) current(b *streams.Batch, archive bool) ([]job, error) {
	jobs := make([]job, 0, len(b.Records))
	latest := make(map[string]int, len(b.Records)) // key → its last job
	for _, r := range b.Records {
		var rec schemas.RegistryRecord
		if err := schemas.RegistryRecords.Decode(r.Value, &rec); err != nil {
			b.Dead(r, err.Error())
			continue
		}
		latest[string(r.Key)] = len(jobs)
		jobs = append(jobs, job{key: r.Key, rec: &rec, saas: true, archive: archive})
	}
	// Only current versions go to the search feed: a change followed
	// by another of its key in the batch is superseded, and so is one
	// the registry has moved past. The archive takes every version.
	for i := range jobs {
		j := &jobs[i]
		if latest[string(j.key)] != i {
			j.saas = false
		} else if ix.cfg.Current != nil {
			cur, err := ix.cfg.Current(string(j.key))
			if err != nil {
				return nil, fmt.Errorf("look up %s in the registry: %w", j.key, err)
			}
			j.saas = !Superseded(cur, j.rec)
		}
		if !j.saas {
			ix.cfg.Metrics.Superseded.Inc()
		}
	}
	return jobs, nil
}

func (ix *indexer) runRetries(ctx context.Context) error {
	return ix.consume(ctx, RetryGroup, topics.DocumentsFailed, func(ctx context.Context, b *streams.Batch) error {
		for _, r := range b.Records {
			var f schemas.FailedConversion
			if err := schemas.FailedConversions.Decode(r.Value, &f); err != nil {
				b.Dead(r, err.Error())
				continue
			}
			due := f.FailedAt.Add(Backoff(int(f.Attempts), ix.cfg.RetryMin, ix.cfg.RetryMax))
			if wait := time.Until(due); wait > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
			j := job{key: r.Key, rec: &f.Change, attempts: int(f.Attempts), saas: true, archive: true}
			if ix.cfg.Current != nil {
				cur, err := ix.cfg.Current(string(r.Key))
				if err != nil {
					return fmt.Errorf("look up %s in the registry: %w", r.Key, err)
				}
				// Deliver to the search feed only what the registry still
				// holds; the archive takes every version.
				j.saas = cur != nil && cur.Status == f.Change.Status &&
					registry.Compare(registry.StampOf(cur), registry.StampOf(&f.Change)) == 0
			}
			failed, err := ix.deliver(ctx, ix.prod, []job{j})
			if err != nil {
				return err
			}
			switch {
			case len(failed) > 0:
				ix.cfg.Metrics.Retried.With("failed").Inc()
			case !j.saas:
				ix.cfg.Metrics.Retried.With("superseded").Inc()
			default:
				ix.cfg.Metrics.Retried.With("delivered").Inc()
			}
			if err := produceAll(ctx, ix.prod, failed); err != nil {
				return err
			}
		}
		return nil
	})
}

// Superseded reports whether the registry, holding cur, has moved past
// the change ch: it holds a fresher version, or the same version deleted
// since (an expiry). A registry copy that lags (cur older, or nil: a key
// it does not show yet) never makes a change superseded.
func Superseded(cur, ch *schemas.RegistryRecord) bool {
	if cur == nil {
		return false
	}
	switch registry.Compare(registry.StampOf(cur), registry.StampOf(ch)) {
	case 1:
		return true
	case 0:
		return cur.Status == schemas.StatusTombstone && ch.Status != schemas.StatusTombstone
	}
	return false
}

// Replay re-delivers every change of documents.changes to the client feeds:
// it deletes the indexer group's committed offsets and runs the indexer until
// it has committed every change that was there when the replay began. The
// indexer must not be running. The search feeds end as they were (each key's
// last record is the registry's current version); the archive gets the
// versions again, each delivery marked with the replay.Header (the
// indexer has no table: re-delivery is all its replay does).
func Replay(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	spec := replay.Spec{Group: Group, Inputs: []string{topics.DocumentsChanges}, AllowGaps: cfg.AllowGaps,
		Outputs: replay.Reemit, Logger: cfg.Logger}
	prod, err := cfg.Cluster.Producer(Group, kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer prod.Close()
	cfg.replayed = []byte(time.Now().UTC().Format(time.RFC3339))
	ix := &indexer{cfg: cfg, prod: prod, clients: map[string]bool{}}
	return spec.Run(ctx, cfg.Cluster.Admin(), ix.runChanges)
}

// Backoff returns the wait before retry number attempts: min doubled per
// earlier attempt, at most max (streams.Backoff's rule).
func Backoff(attempts int, min, max time.Duration) time.Duration {
	return streams.Backoff{Initial: min, Max: max}.Ceiling(attempts)
}

type job struct {
	key      []byte
	rec      *schemas.RegistryRecord
	attempts int
	saas     bool // deliver to the search feed
	archive  bool // deliver to the archive
}

// deliver converts and produces jobs, waits for every acknowledgement and
// returns the failed-queue records of the jobs that could not be delivered.
// It returns an error only if the failed-queue records cannot be built.
func (ix *indexer) deliver(ctx context.Context, cl *kgo.Client, jobs []job) ([]*kgo.Record, error) {
	reasons := make([]error, len(jobs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	fail := func(i int, err error) {
		mu.Lock()
		reasons[i] = errors.Join(reasons[i], err)
		mu.Unlock()
	}
	for i, j := range jobs {
		if err := ix.ensureClient(ctx, j.rec.Client); err != nil {
			fail(i, err)
			continue
		}
		conv, err := ix.cfg.Convert(j.rec)
		if err != nil {
			fail(i, fmt.Errorf("convert: %w", err))
			continue
		}
		var outs []*kgo.Record
		if j.saas {
			data, err := schemas.SaasDocuments.EncodeFramed(conv.Saas, ix.cfg.Framing)
			if err != nil {
				fail(i, err)
				continue
			}
			outs = append(outs, &kgo.Record{Topic: topics.SaasTopic(j.rec.Client), Key: j.key, Value: data})
		}
		if conv.Yt != nil && j.archive {
			data, err := schemas.YtRecords.EncodeFramed(conv.Yt, ix.cfg.Framing)
			if err != nil {
				fail(i, err)
				continue
			}
			outs = append(outs, &kgo.Record{Topic: topics.YtTopic(j.rec.Client), Key: j.key, Value: data})
		}
		for _, o := range outs {
			if ix.cfg.replayed != nil {
				o.Headers = append(o.Headers, kgo.RecordHeader{Key: replay.Header, Value: ix.cfg.replayed})
			}
			wg.Add(1)
			feed := "saas"
			if o.Topic == topics.YtTopic(j.rec.Client) {
				feed = "yt"
			}
			cl.Produce(ctx, o, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					fail(i, fmt.Errorf("deliver to %s: %w", o.Topic, err))
					return
				}
				ix.cfg.Metrics.Delivered.With(feed).Inc()
			})
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var failed []*kgo.Record
	now := time.Now()
	for i, err := range reasons {
		if err == nil {
			continue
		}
		j := jobs[i]
		ix.cfg.Logger.Warn("change not delivered, queued for retry", "key", string(j.key), "attempt", j.attempts+1, "err", err)
		data, encErr := schemas.FailedConversions.Encode(&schemas.FailedConversion{
			Change: *j.rec, Reason: err.Error(), Attempts: int32(j.attempts + 1), FailedAt: now})
		if encErr != nil {
			return nil, encErr
		}
		failed = append(failed, &kgo.Record{Topic: topics.DocumentsFailed, Key: j.key, Value: data})
		ix.cfg.Metrics.Failed.Inc()
	}
	return failed, nil
}

// ensureClient creates the client's feed topics the first time the indexer
// sees the client.
func (ix *indexer) ensureClient(ctx context.Context, client string) error {
	ix.mu.Lock()
	known := ix.clients[client]
	ix.mu.Unlock()
	if known {
		return nil
	}
	if err := topics.ValidateClient(client); err != nil {
		return err
	}
	_, err := topics.Ensure(ctx, ix.cfg.Cluster.Admin(), ix.cfg.Replication, topics.ForClient(client, ix.cfg.Partitions))
	switch {
	case errors.Is(err, topics.ErrMismatch):
		// The topics exist but differ from the catalogue (say, partitions
		// were added by hand): deliver anyway, and say so.
		ix.cfg.Logger.Warn("client topics differ from the catalogue", "client", client, "err", err)
	case err != nil:
		return fmt.Errorf("create the topics of client %s: %w", client, err)
	}
	ix.mu.Lock()
	ix.clients[client] = true
	ix.mu.Unlock()
	return nil
}

// produceAll produces recs and waits until all are acknowledged; it returns
// the first error.
func produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return nil
}
