// Package feeds loads bulk uploads ("автозагрузка"): items on feeds.ingest,
// keyed by seller, each with its task_id and external_id, and an end marker
// per task. It is the consumer group "feeds" (franz-go): items are matched
// by external id among the seller's offers through the feeds.index table
// the aggregate keeps, matched offers are updated (FEED_UPSERT), others
// created with a fresh id (CREATE, offers.IDs), and at the end marker every
// offer of the feed the task did not touch is deleted (FEED_DELETE), in
// rounds of at most Round read as a range of feeds.tasks (the index by
// task: the seed's "task_id < ? LIMIT 1000", no scan of the seller's whole
// index), until none is left: only then is the marker's offset committed,
// as in the seed. A task whose upload failed,
// or is partial (an item refused, or fewer loaded than the marker says were
// uploaded), removes nothing.
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
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Group is the loader's consumer group.
const Group = "feeds"

// Index is the table of feeds.index, for views.
const Index = topics.FeedsIndex

// IndexCodec is the codec of feeds.index values.
var IndexCodec streams.Codec = streams.Table[schemas.FeedEntry]{C: schemas.FeedEntries}

// Tasks is the table of feeds.tasks (feeds.index by task), for views.
const Tasks = topics.FeedsTasks

// Round is how many leftover offers a finished task deletes at a time
// (gost.md: "... LIMIT 1000"): at most so many deletes are in flight.
const Round = 1000

// Statuses is the table of feeds.status, for views.
const Statuses = topics.FeedsStatus

// StatusCodec is the codec of feeds.status values.
var StatusCodec streams.Codec = streams.Table[schemas.FeedStatus]{C: schemas.FeedStatuses}

// Metrics of the loader.
type Metrics struct {
	Items   *metrics.CounterVec // by outcome
	Deleted *metrics.Counter
	// Rounds counts the rounds of leftover deletion (at most Round each).
	Rounds   *metrics.Counter
	Finished *metrics.Counter
	// Kept counts tasks finished without removing anything: the upload
	// failed, or not every item of it was loaded.
	Kept *metrics.Counter
	// Loop counts the loader's records by outcome (dead letters included).
	Loop *streams.LoopMetrics
}

// NewMetrics registers the loader's metrics in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		Items:    r.Counter("offerlog_feeds_items_total", "Feed items by outcome.", "outcome"),
		Deleted:  r.Counter("offerlog_feeds_deleted_total", "Offers deleted because a finished feed did not have them.").With(),
		Rounds:   r.Counter("offerlog_feeds_delete_rounds_total", "Rounds of leftover deletion of finished feed tasks, each of at most 1000 deletes.").With(),
		Finished: r.Counter("offerlog_feeds_finished_total", "Feed tasks finished.").With(),
		Kept:     r.Counter("offerlog_feeds_kept_total", "Feed tasks finished without removing anything: a failed or partial upload.").With(),
		Loop:     streams.NewLoopMetrics(r),
	}
}

// Config of the loader.
type Config struct {
	Streams table.Config
	// Producer appends commands and dead letters (acks=all); not closed.
	Producer *kgo.Client
	// Offers sends commands to the aggregate.
	Offers *offers.Client
	// IDs hands out the ids of the offers items create.
	IDs *offers.IDs
	// View is a running view of feeds.index.
	View *table.View
	// Tasks is a running view of feeds.tasks: a task's entries, and the
	// leftovers of the tasks before it, are ranges of it.
	Tasks *table.View
	// Status is a running view of feeds.status, whence a loader takes the
	// statuses of the tasks it continues; nil keeps no status.
	Status *table.View
	// Partitions of feeds.ingest: an item on another partition than its
	// seller's (a producer without Kafka's partitioner) is dead-lettered
	// with the partition it belongs on, for a seller's items and end
	// markers must be read in one order. 0 skips the check.
	Partitions int32
	Metrics    *Metrics
	Logger     *slog.Logger
	// Retry is the wait before a batch that failed (no answer, broker
	// trouble) is tried again.
	Retry time.Duration
	// Settle bounds the wait, at an end marker that tells how many items
	// the task uploaded, for the index to show them all (it lags the
	// aggregate); past it the upload counts as partial. Default 3 s.
	Settle time.Duration
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
	if cfg.Settle <= 0 {
		cfg.Settle = 3 * time.Second
	}
	if err := cfg.Streams.Validate(); err != nil {
		return err
	}
	if cfg.Producer == nil || cfg.Offers == nil || cfg.View == nil {
		return errors.New("feeds: producer, offers client and index view are required")
	}
	for _, v := range []*table.View{cfg.View, cfg.Status} {
		if v == nil {
			continue
		}
		select {
		case <-v.Ready():
		case <-ctx.Done():
			return nil
		}
	}
	// A seller's items are on one partition: each partition has a loader
	// of its own, and partitions load concurrently.
	var mu sync.Mutex
	loaders := map[int32]*loader{}
	// kept keeps, by partition, what a revoked loader knew that the index
	// view may not show yet: the ids of the CREATEs it sent and had no
	// answer to, and the entries of those answered. The partition's next
	// loader in this process starts from them: a broker restarted makes
	// the group revoke and assign the same partitions while the answers
	// of the commands appended before it were lost and the view catches
	// up, and items read again must not make second offers.
	type memory struct {
		drawn map[string]string
		known map[string]schemas.FeedEntry
	}
	kept := map[int32]memory{}
	return streams.RunLoop(ctx, streams.LoopConfig{Cluster: cfg.Streams.Cluster, Group: Group, Topics: []string{topics.FeedsIngest},
		DeadTopic: topics.OffersDead, Producer: cfg.Producer, Logger: cfg.Logger, Metrics: cfg.Metrics.Loop,
		Backoff: streams.Backoff{Initial: cfg.Retry, Max: 30 * cfg.Retry},
		BatchHandler: func(ctx context.Context, b *streams.Batch) error {
			mu.Lock()
			l, ok := loaders[b.Partition]
			if !ok {
				m := kept[b.Partition]
				delete(kept, b.Partition)
				if m.drawn == nil {
					m = memory{drawn: map[string]string{}, known: map[string]schemas.FeedEntry{}}
				}
				l = &loader{cfg: cfg, known: m.known, drawn: m.drawn, partial: map[string]int64{},
					status: map[string]*schemas.FeedStatus{}}
				loaders[b.Partition] = l
			}
			mu.Unlock()
			return l.batch(ctx, b)
		},
		// A partition that comes back may have been loaded elsewhere
		// meanwhile: its next loader starts from the statuses on
		// feeds.status, not from this one's memory.
		OnRevoked: func(taken map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range taken[topics.FeedsIngest] {
				if l := loaders[p]; l != nil {
					kept[p] = memory{drawn: l.drawn, known: l.known}
				}
				delete(loaders, p)
			}
		}})
}

type loader struct {
	cfg Config
	// known holds the index entries this loader wrote and the view may not
	// show yet, by feeds.index key.
	known map[string]schemas.FeedEntry
	// drawn holds the ids of CREATEs sent and not answered yet, by
	// feeds.index key.
	drawn map[string]string
	// partial holds, by seller, the last task of which this loader saw an
	// item refused (dead-lettered, or INVALID for the aggregate).
	partial map[string]int64
	// status holds the statuses of the tasks this loader wrote, by
	// feeds.status key; viewCaughtUp is set once the status view showed
	// what was written before this loader began.
	status       map[string]*schemas.FeedStatus
	viewCaughtUp bool
	// indexCaughtUp is set once the index view showed what was written
	// before this loader began: a partition that comes back (a rejoin
	// after its session was lost) reads again the items after its last
	// commit, and an index behind their first load, without the entries
	// the last loader knew, would have them create their offers again.
	indexCaughtUp bool
}

// rejected notes that an item of seller's task was not loaded.
func (l *loader) rejected(seller string, task int64) {
	if task > l.partial[seller] {
		l.partial[seller] = task
	}
}

// batch loads b's records, then writes the statuses of the tasks they
// counted in.
func (l *loader) batch(ctx context.Context, b *streams.Batch) error {
	if !l.indexCaughtUp {
		if err := l.cfg.View.Sync(ctx); err != nil {
			return fmt.Errorf("feeds: index view: %w", err)
		}
		l.indexCaughtUp = true
	}
	bs := &batchStatus{l: l, m: map[string]*schemas.FeedStatus{}}
	if err := l.records(ctx, b, bs); err != nil {
		return err
	}
	return bs.write(ctx)
}

// records handles b's records in order: runs of items are sent together,
// an end marker waits for the items before it.
func (l *loader) records(ctx context.Context, b *streams.Batch, bs *batchStatus) error {
	var run []schemas.FeedItem
	var counted []*schemas.FeedStatus
	for _, r := range b.Records {
		var it schemas.FeedItem
		err := schemas.FeedItems.Decode(r.Value, &it)
		switch {
		case err != nil:
			err = fmt.Errorf("undecodable item: %w", err)
		case l.cfg.Partitions > 0 && streams.Misplaced(string(r.Key), r.Partition, l.cfg.Partitions) != "":
			err = errors.New(streams.Misplaced(string(r.Key), r.Partition, l.cfg.Partitions))
		default:
			err = check(&it, string(r.Key))
		}
		if err != nil {
			b.Dead(r, err.Error())
			if it.SellerID == string(r.Key) && it.TaskID > 0 && !it.End {
				l.rejected(it.SellerID, it.TaskID)
				st, err := bs.count(ctx, r, &it)
				if err != nil {
					return err
				}
				if st != nil {
					st.Received++
					st.Refused++
				}
			}
			continue
		}
		st, err := bs.count(ctx, r, &it)
		if err != nil {
			return err
		}
		if !it.End {
			if st != nil {
				st.Received++
			}
			run = append(run, it)
			counted = append(counted, st)
			continue
		}
		if err := l.items(ctx, run, counted); err != nil {
			return err
		}
		run, counted = run[:0], counted[:0]
		if err := l.finish(ctx, &it, st); err != nil {
			return err
		}
	}
	return l.items(ctx, run, counted)
}

// batchStatus holds the statuses a batch changes, apart from the loader's
// until they are written: a batch that fails is tried again from the
// statuses as they were.
type batchStatus struct {
	l *loader
	m map[string]*schemas.FeedStatus
}

// count returns the status of record r's task to count r in, or nil when
// r was counted already (at or before the status's offset: a batch loaded
// again after a crash) or no status is kept.
func (bs *batchStatus) count(ctx context.Context, r *kgo.Record, it *schemas.FeedItem) (*schemas.FeedStatus, error) {
	if bs.l.cfg.Status == nil {
		return nil, nil
	}
	key := StatusKey(it.SellerID, it.TaskID)
	st, ok := bs.m[key]
	if !ok {
		prev, err := bs.l.statusOf(ctx, key)
		if err != nil {
			return nil, err
		}
		cp := *prev
		st = &cp
	}
	if r.Offset <= st.Offset {
		return nil, nil
	}
	st.SellerID, st.TaskID, st.Partition, st.Offset = it.SellerID, it.TaskID, r.Partition, r.Offset
	if !it.End {
		st.State, st.Reason = schemas.FeedLoading, ""
	}
	bs.m[key] = st
	return st, nil
}

// write puts the batch's statuses on feeds.status, before the loop commits
// the batch, and makes them the loader's.
func (bs *batchStatus) write(ctx context.Context) error {
	if len(bs.m) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, 0, len(bs.m))
	now := time.Now().UTC()
	for key, st := range bs.m {
		st.UpdatedAt = now
		data, err := schemas.FeedStatuses.Encode(st)
		if err != nil {
			return fmt.Errorf("feeds: status: %w", err)
		}
		recs = append(recs, &kgo.Record{Topic: string(topics.FeedsStatus), Key: []byte(key), Value: data})
	}
	if err := bs.l.cfg.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("feeds: write statuses: %w", err)
	}
	for key, st := range bs.m {
		bs.l.status[key] = st
	}
	return nil
}

// StatusKey is the feeds.status key of seller's task.
func StatusKey(seller string, task int64) string { return fmt.Sprintf("%s/%d", seller, task) }

// statusOf returns the last status of the task written: this loader's, or
// the view's once it caught up with what was written before, or a new one.
func (l *loader) statusOf(ctx context.Context, key string) (*schemas.FeedStatus, error) {
	if st, ok := l.status[key]; ok {
		return st, nil
	}
	if !l.viewCaughtUp {
		if err := l.cfg.Status.Sync(ctx); err != nil {
			return nil, fmt.Errorf("feeds: status view: %w", err)
		}
		l.viewCaughtUp = true
	}
	v, err := l.cfg.Status.Get(key)
	if err != nil {
		return nil, fmt.Errorf("feeds: status: %w", err)
	}
	if st, ok := v.(*schemas.FeedStatus); ok {
		return st, nil
	}
	return &schemas.FeedStatus{Offset: -1}, nil
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
	case schemas.CheckKey(it.ExternalID) != nil:
		return fmt.Errorf("external_id %.64q: %w", it.ExternalID, schemas.CheckKey(it.ExternalID))
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
	cmds, _, older, err := plan(run, lookup, func(string) string { return newID() })
	return cmds, len(older), err
}

// plan is Plan, with the index in run of the item each command stands
// for, and the indexes of the items skipped as older.
func plan(run []schemas.FeedItem, lookup func(key string) (schemas.FeedEntry, bool, error), newID func(key string) string) (
	cmds []*schemas.OfferCommand, idx []int, older []int, err error) {
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
	for _, k := range order {
		it := run[last[k]]
		e, ok, err := lookup(k)
		if err != nil {
			return nil, nil, nil, err
		}
		c := &schemas.OfferCommand{Kind: schemas.CommandCreate, SellerID: it.SellerID,
			ExpectedVersion: -1, Offer: it.Offer, TaskID: it.TaskID, ExternalID: it.ExternalID}
		switch {
		case ok && e.TaskID > it.TaskID:
			older = append(older, last[k])
			continue
		case ok:
			c.Kind, c.OfferID = schemas.CommandFeedUpsert, e.OfferID
		default:
			c.OfferID = newID(k)
		}
		cmds = append(cmds, c)
		idx = append(idx, last[k])
	}
	return cmds, idx, older, nil
}

// items upserts a run of items (Plan), drawing new ids on collisions and
// creating anew an offer deleted since the index was read. counted holds,
// for each item, the status to count it in (nil: counted already).
func (l *loader) items(ctx context.Context, run []schemas.FeedItem, counted []*schemas.FeedStatus) error {
	var idErr error
	fresh := func() string {
		id, err := l.cfg.IDs.New(ctx)
		if err != nil && idErr == nil {
			idErr = err
		}
		return id
	}
	// An item's CREATE keeps the id it was first sent with until it is
	// answered: a batch tried again after its answers were lost (a broker
	// killed after the commands were appended) sends the same commands,
	// not new offers; the index may not show the first ones yet.
	newID := func(key string) string {
		if id, ok := l.drawn[key]; ok {
			return id
		}
		id := fresh()
		if id != "" {
			l.drawn[key] = id
		}
		return id
	}
	cmds, idx, older, err := plan(run, l.lookup, newID)
	if err == nil {
		err = idErr
	}
	if err != nil {
		return err
	}
	l.cfg.Metrics.Items.With("older task").Add(uint64(len(older)))
	standing := map[int]bool{}
	for _, i := range idx {
		standing[i] = true
	}
	for i, st := range counted {
		if st != nil && !standing[i] {
			st.Skipped++ // an older task's, or repeated later in the run
		}
	}
	for len(cmds) > 0 {
		if idErr != nil {
			return idErr
		}
		res, errs := l.cfg.Offers.DoAll(ctx, cmds)
		var again []*schemas.OfferCommand
		var againIdx []int
		for i, c := range cmds {
			if errs[i] != nil {
				return errs[i]
			}
			// Answered: a later CREATE of the item draws anew.
			key := offers.FeedKey(c.SellerID, c.ExternalID)
			delete(l.drawn, key)
			switch res[i].Outcome {
			case schemas.OutcomeCollision:
				// Ids are unique by construction (offers.IDs); an offer of
				// an id drawn at random before 0.5.0 may still hold one.
				c.OfferID = newID(key)
				again, againIdx = append(again, c), append(againIdx, idx[i])
			case schemas.OutcomeNotFound:
				// Deleted since the index was read: the item makes a new offer.
				c.Kind, c.OfferID = schemas.CommandCreate, newID(key)
				again, againIdx = append(again, c), append(againIdx, idx[i])
			case schemas.OutcomeConflict:
				if c.Kind != schemas.CommandCreate {
					if st := counted[idx[i]]; st != nil {
						st.Skipped++
					}
					break
				}
				// The item's offer exists (the index did not show it yet),
				// created by an earlier task or with other content: it is
				// updated instead.
				c.Kind = schemas.CommandFeedUpsert
				again, againIdx = append(again, c), append(againIdx, idx[i])
			case schemas.OutcomeInvalid:
				l.rejected(c.SellerID, c.TaskID)
				if st := counted[idx[i]]; st != nil {
					st.Refused++
				}
			case schemas.OutcomeOK:
				if st := counted[idx[i]]; st != nil {
					st.Applied++
				}
				l.known[key] = schemas.FeedEntry{SellerID: c.SellerID,
					ExternalID: c.ExternalID, OfferID: c.OfferID, TaskID: c.TaskID}
			default: // IGNORED: the aggregate's rules (an older task, a ban) left the offer as it was
				if st := counted[idx[i]]; st != nil {
					st.Skipped++
				}
			}
			l.cfg.Metrics.Items.With(string(res[i].Outcome)).Inc()
		}
		cmds, idx = again, againIdx
	}
	return nil
}

// complete reports whether the task of end marker it may remove offers: not
// when the upload failed, nor when an item of it was refused, nor when the
// marker tells how many items were uploaded and the index does not show that
// many loaded by the task within cfg.Settle. A task on which the loader
// cannot be sure removes nothing: the next complete one does.
func (l *loader) complete(ctx context.Context, it *schemas.FeedItem) (bool, string, error) {
	switch {
	case it.Failed:
		return false, "the upload failed", nil
	case l.partial[it.SellerID] == it.TaskID:
		return false, "an item of the task was refused", nil
	case it.Items <= 0:
		return true, "", nil
	}
	deadline := time.Now().Add(l.cfg.Settle)
	for {
		loaded := int64(0)
		err := l.tasks(it.SellerID, it.TaskID, it.TaskID+1, func(e schemas.FeedEntry) bool {
			loaded++
			return loaded < it.Items
		})
		if err != nil {
			return false, "", err
		}
		if loaded >= it.Items {
			return true, "", nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Sprintf("%d of the %d items uploaded were loaded", loaded, it.Items), nil
		}
		select {
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tasks calls fn with the seller's feed entries of the tasks from to to-1
// (feeds.tasks, a range of keys: no other entry is read), and those this
// loader wrote that the view may not show yet (which win), until fn
// returns false.
func (l *loader) tasks(seller string, from, to int64, fn func(schemas.FeedEntry) bool) error {
	mine := map[string]schemas.FeedEntry{}
	for k, e := range l.known {
		if e.SellerID == seller && e.TaskID >= from && e.TaskID < to {
			mine[k] = e
		}
	}
	it, err := l.cfg.Tasks.IteratorWithRange(offers.FeedTaskPrefix(seller, from), offers.FeedTaskPrefix(seller, to))
	if err != nil {
		return fmt.Errorf("feeds: index by task: %w", err)
	}
	defer it.Release()
	for it.Next() {
		v, err := it.Value()
		e, ok := v.(*schemas.FeedEntry)
		if err != nil || !ok {
			continue
		}
		k := offers.FeedKey(e.SellerID, e.ExternalID)
		if m, ok := l.known[k]; ok && m.TaskID != e.TaskID {
			continue // this loader moved it to another task since
		}
		delete(mine, k)
		if !fn(*e) {
			return nil
		}
	}
	for _, e := range mine {
		if !fn(e) {
			return nil
		}
	}
	return nil
}

// finish ends a task at its end marker it: unless the upload failed or is
// partial (complete), every offer of the seller's feed the task did not
// touch is deleted, in rounds, until the index shows none that was not
// answered.
// st, if not nil, is the task's status to count the end in.
func (l *loader) finish(ctx context.Context, it *schemas.FeedItem, st *schemas.FeedStatus) error {
	seller, task := it.SellerID, it.TaskID
	whole, why, err := l.complete(ctx, it)
	if err != nil {
		return err
	}
	if st != nil {
		st.Uploaded = it.Items
		st.State, st.Reason = schemas.FeedDone, ""
		if !whole {
			st.State, st.Reason = schemas.FeedPartial, why
			if it.Failed {
				st.State = schemas.FeedFailed
			}
		}
	}
	if !whole {
		l.cfg.Logger.Warn("feeds: task finished without removing anything", "seller", seller, "task", task, "why", why)
		l.cfg.Metrics.Kept.Inc()
		l.cfg.Metrics.Finished.Inc()
		return nil
	}
	// The seed's rounds: the entries of the tasks before this one, at
	// most Round at a time, until none is left that was not answered.
	answered := map[string]bool{}
	for {
		var cmds []*schemas.OfferCommand
		err := l.tasks(seller, 0, task, func(e schemas.FeedEntry) bool {
			if !answered[e.OfferID] {
				cmds = append(cmds, &schemas.OfferCommand{Kind: schemas.CommandFeedDelete, OfferID: e.OfferID,
					SellerID: seller, ExpectedVersion: -1, TaskID: task, ExternalID: e.ExternalID})
			}
			return len(cmds) < Round
		})
		if err != nil {
			return err
		}
		if len(cmds) == 0 {
			break
		}
		l.cfg.Metrics.Rounds.Inc()
		res, errs := l.cfg.Offers.DoAll(ctx, cmds)
		for i, c := range cmds {
			if errs[i] != nil {
				return errs[i]
			}
			answered[c.OfferID] = true
			if res[i].Outcome == schemas.OutcomeOK {
				l.cfg.Metrics.Deleted.Inc()
				if st != nil {
					st.Deleted++
				}
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
