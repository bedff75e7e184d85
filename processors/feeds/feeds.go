// Package feeds loads bulk uploads ("автозагрузка"): items on feeds.ingest,
// keyed by seller, each with its task_id and external_id, and an end marker
// per task. It is the consumer group "feeds" (franz-go): items are matched
// by external id among the seller's offers through the feeds.index table
// the aggregate keeps, matched offers are updated (FEED_UPSERT), others
// created with a fresh id (CREATE, drawn again on a collision), and at the
// end marker every offer of the feed the task did not touch is deleted
// (FEED_DELETE), in rounds until the index holds none: only then is the
// marker's offset committed, as in the seed.
//
// The aggregate is the authority on every rule that depends on the offer
// (an older task is ignored, a ban stays, an offer touched by the task is
// not deleted), so a lagging index only costs commands that change nothing.
package feeds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Group is the loader's consumer group.
const Group = "feeds"

// Index is the table of feeds.index, as a goka table name for views.
var Index = goka.Table(topics.FeedsIndex)

// IndexCodec is the codec of feeds.index values.
var IndexCodec goka.Codec = streams.Table[schemas.FeedEntry]{C: schemas.FeedEntries}

// Metrics of the loader.
type Metrics struct {
	Items    *metrics.CounterVec // by outcome
	Deleted  *metrics.Counter
	Finished *metrics.Counter
	// Loop counts the loader's records by outcome (dead letters included).
	Loop *streams.LoopMetrics
}

// NewMetrics registers the loader's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Items:    r.Counter("offerlog_feeds_items_total", "Feed items by outcome.", "outcome"),
		Deleted:  r.Counter("offerlog_feeds_deleted_total", "Offers deleted because a finished feed did not have them.").With(),
		Finished: r.Counter("offerlog_feeds_finished_total", "Feed tasks finished.").With(),
		Loop:     streams.NewLoopMetrics(r),
	}
}

// Config of the loader.
type Config struct {
	Streams streams.Config
	// Producer appends commands and dead letters (acks=all); not closed.
	Producer *kgo.Client
	// Offers sends commands to the aggregate.
	Offers *offers.Client
	// View is a running view of feeds.index.
	View    *goka.View
	Metrics *Metrics
	Logger  *slog.Logger
	// Retry is the wait before a batch that failed (no answer, broker
	// trouble) is tried again.
	Retry time.Duration
}

// Run runs the loader until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(metrics.New())
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if err := cfg.Streams.Validate(); err != nil {
		return err
	}
	if cfg.Producer == nil || cfg.Offers == nil || cfg.View == nil {
		return errors.New("feeds: producer, offers client and index view are required")
	}
	select {
	case <-cfg.View.WaitRunning():
	case <-ctx.Done():
		return nil
	}
	// A seller's items are on one partition: each partition has a loader
	// of its own, and partitions load concurrently.
	var mu sync.Mutex
	loaders := map[int32]*loader{}
	return streams.RunLoop(ctx, streams.LoopConfig{Brokers: cfg.Streams.Brokers, Group: Group, Topics: []string{topics.FeedsIngest},
		DeadTopic: topics.OffersDead, Producer: cfg.Producer, Logger: cfg.Logger, Metrics: cfg.Metrics.Loop,
		Backoff: streams.Backoff{Initial: cfg.Retry, Max: 30 * cfg.Retry},
		BatchHandler: func(ctx context.Context, b *streams.Batch) error {
			mu.Lock()
			l, ok := loaders[b.Partition]
			if !ok {
				l = &loader{cfg: cfg, known: map[string]schemas.FeedEntry{}}
				loaders[b.Partition] = l
			}
			mu.Unlock()
			return l.batch(ctx, b)
		}})
}

type loader struct {
	cfg Config
	// known holds the index entries this loader wrote and the view may not
	// show yet, by feeds.index key.
	known map[string]schemas.FeedEntry
}

// batch handles records in order: runs of items are sent together, an end
// marker waits for the items before it.
func (l *loader) batch(ctx context.Context, b *streams.Batch) error {
	var run []schemas.FeedItem
	for _, r := range b.Records {
		var it schemas.FeedItem
		err := schemas.FeedItems.Decode(r.Value, &it)
		if err != nil {
			err = fmt.Errorf("undecodable item: %w", err)
		} else {
			err = check(&it, string(r.Key))
		}
		if err != nil {
			b.Dead(r, err.Error())
			continue
		}
		if !it.End {
			run = append(run, it)
			continue
		}
		if err := l.items(ctx, run); err != nil {
			return err
		}
		run = run[:0]
		if err := l.finish(ctx, it.SellerID, it.TaskID); err != nil {
			return err
		}
	}
	return l.items(ctx, run)
}

func check(it *schemas.FeedItem, key string) error {
	switch {
	case it.SellerID != key:
		return fmt.Errorf("seller %q is not the message key %q", it.SellerID, key)
	case offers.ValidSeller(it.SellerID) != nil:
		return offers.ValidSeller(it.SellerID)
	case it.TaskID <= 0:
		return fmt.Errorf("task_id %d: want a positive task id", it.TaskID)
	case it.End:
		return nil
	case it.ExternalID == "" || strings.ContainsAny(it.ExternalID, "\x00"):
		return fmt.Errorf("external_id %q: want a non-empty id", it.ExternalID)
	case it.Offer == nil:
		return errors.New("offer: missing")
	}
	return nil
}

func (l *loader) lookup(key string) (schemas.FeedEntry, bool, error) {
	if e, ok := l.known[key]; ok {
		return e, true, nil
	}
	v, err := l.cfg.View.Get(key)
	if err != nil {
		return schemas.FeedEntry{}, false, fmt.Errorf("feeds: index: %w", err)
	}
	e, ok := v.(*schemas.FeedEntry)
	if !ok {
		return schemas.FeedEntry{}, false, nil
	}
	return *e, true, nil
}

// Plan returns the commands for a run of feed items, given the index
// (lookup by feeds.index key) and a source of fresh ids: of several items
// for one external id, the one of the latest task (the last on a tie)
// stands for them all; an item older than the task that last loaded its
// offer is skipped; a matched item updates its offer (FEED_UPSERT), an
// unmatched one creates an offer. It returns the commands in the order of
// the items' first appearance, and how many items were skipped as older.
func Plan(run []schemas.FeedItem, lookup func(key string) (schemas.FeedEntry, bool, error), newID func() string) ([]*schemas.OfferCommand, int, error) {
	last := map[string]int{}
	var order []string
	for i, it := range run {
		k := offers.FeedKey(it.SellerID, it.ExternalID)
		j, ok := last[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || run[j].TaskID <= it.TaskID {
			last[k] = i
		}
	}
	var cmds []*schemas.OfferCommand
	older := 0
	for _, k := range order {
		it := run[last[k]]
		e, ok, err := lookup(k)
		if err != nil {
			return nil, 0, err
		}
		c := &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: newID(), SellerID: it.SellerID,
			ExpectedVersion: -1, Offer: it.Offer, TaskID: it.TaskID, ExternalID: it.ExternalID}
		switch {
		case ok && e.TaskID > it.TaskID:
			older++
			continue
		case ok:
			c.Kind, c.OfferID = schemas.CommandFeedUpsert, e.OfferID
		}
		cmds = append(cmds, c)
	}
	return cmds, older, nil
}

// items upserts a run of items (Plan), drawing new ids on collisions and
// creating anew an offer deleted since the index was read.
func (l *loader) items(ctx context.Context, run []schemas.FeedItem) error {
	cmds, older, err := Plan(run, l.lookup, offers.NewID)
	if err != nil {
		return err
	}
	l.cfg.Metrics.Items.With("older task").Add(uint64(older))
	for len(cmds) > 0 {
		res, errs := l.cfg.Offers.DoAll(ctx, cmds)
		var again []*schemas.OfferCommand
		for i, c := range cmds {
			if errs[i] != nil {
				return errs[i]
			}
			switch res[i].Outcome {
			case schemas.OutcomeCollision:
				c.OfferID = offers.NewID()
				again = append(again, c)
			case schemas.OutcomeNotFound:
				// Deleted since the index was read: the item makes a new offer.
				c.Kind, c.OfferID = schemas.CommandCreate, offers.NewID()
				again = append(again, c)
			case schemas.OutcomeOK:
				l.known[offers.FeedKey(c.SellerID, c.ExternalID)] = schemas.FeedEntry{SellerID: c.SellerID,
					ExternalID: c.ExternalID, OfferID: c.OfferID, TaskID: c.TaskID}
			}
			l.cfg.Metrics.Items.With(string(res[i].Outcome)).Inc()
		}
		cmds = again
	}
	return nil
}

// entries returns the seller's feed entries: those of the index view, and
// those this loader wrote that the view may not show yet (which win).
func (l *loader) entries(seller string) ([]schemas.FeedEntry, error) {
	from, to := seller+"/", seller+"0" // '0' follows '/'
	byKey := map[string]schemas.FeedEntry{}
	it, err := l.cfg.View.IteratorWithRange(from, to)
	if err != nil {
		return nil, fmt.Errorf("feeds: index: %w", err)
	}
	for it.Next() {
		v, err := it.Value()
		if e, ok := v.(*schemas.FeedEntry); err == nil && ok {
			byKey[it.Key()] = *e
		}
	}
	it.Release()
	for k, e := range l.known {
		if strings.HasPrefix(k, from) {
			byKey[k] = e
		}
	}
	out := make([]schemas.FeedEntry, 0, len(byKey))
	for _, e := range byKey {
		out = append(out, e)
	}
	return out, nil
}

// finish deletes every offer of the seller's feed that task did not touch,
// in rounds, until the index shows none that was not answered.
func (l *loader) finish(ctx context.Context, seller string, task int64) error {
	answered := map[string]bool{}
	for round := 0; ; round++ {
		entries, err := l.entries(seller)
		if err != nil {
			return err
		}
		var cmds []*schemas.OfferCommand
		for _, e := range entries {
			if e.TaskID < task && !answered[e.OfferID] {
				cmds = append(cmds, &schemas.OfferCommand{Kind: schemas.CommandFeedDelete, OfferID: e.OfferID,
					SellerID: seller, ExpectedVersion: -1, TaskID: task, ExternalID: e.ExternalID})
			}
		}
		if len(cmds) == 0 {
			break
		}
		res, errs := l.cfg.Offers.DoAll(ctx, cmds)
		for i, c := range cmds {
			if errs[i] != nil {
				return errs[i]
			}
			answered[c.OfferID] = true
			if res[i].Outcome == schemas.OutcomeOK {
				l.cfg.Metrics.Deleted.Inc()
				delete(l.known, offers.FeedKey(seller, c.ExternalID))
			}
		}
	}
	// Forget what the index now shows.
	for k, e := range l.known {
		if v, err := l.cfg.View.Get(k); err == nil {
			if ie, ok := v.(*schemas.FeedEntry); ok && ie.OfferID == e.OfferID && ie.TaskID >= e.TaskID {
				delete(l.known, k)
			}
		}
	}
	l.cfg.Metrics.Finished.Inc()
	return nil
}
