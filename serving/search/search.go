// Package search is the searcher (seeds/indexing.md: "the component of the
// service that runs attributive and full-text search by the client's
// parameters over the index"). It reads every client's search feed,
// saas.<client>, through the one consume loop, a client registered later
// included, into a Bleve index per client and partition on local disk,
// the position it applied stored in the same batch as the documents (a
// restart resumes exactly there, a kill -9 loses nothing), and answers
// queries over them: words, attribute filters and kNN by cosine over an
// epoch's embeddings, merged over the partitions it holds.
package search

import (
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

	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Group is the searcher's consumer group: its members share the feeds'
// partitions.
const Group = "searcher"

// DefaultWait is how long a search waits for the position it is after.
const DefaultWait = 5 * time.Second

// ErrUnknownClient is a search of a client that has no epoch.
var ErrUnknownClient = errors.New("no such client")

// WaitError is a search whose position or version was not applied in
// time.
type WaitError struct {
	Position Position
	Applied  int64
	// Version, if set, is what the search waited for instead.
	Version *PKVersion
	// reason is a member's own words for it (Remote).
	reason string
}

func (e *WaitError) Error() string {
	if e.reason != "" {
		return e.reason
	}
	where := fmt.Sprintf("partition %d of the feed applied up to offset %d", e.Position.Partition, e.Applied-1)
	switch {
	case e.Applied < 0:
		where = fmt.Sprintf("partition %d of the feed not held by this searcher yet", e.Position.Partition)
	case e.Applied == 0:
		where = fmt.Sprintf("nothing of partition %d of the feed applied yet", e.Position.Partition)
	}
	if v := e.Version; v != nil {
		return fmt.Sprintf("version %d of %q is not applied yet (%s)", v.Version, v.PK, where)
	}
	return fmt.Sprintf("offset %d is not applied yet (%s)", e.Position.Offset, where)
}

// Epochs are the clients' epoch schemas (registry.Catalogue).
type Epochs interface {
	List(client string) []*schemas.EpochSchema
	Get(client string, epoch int64) (*schemas.EpochSchema, bool)
	// Sync returns once the epochs are read to the end they had when it
	// was called.
	Sync(ctx context.Context, adm *kadm.Client) error
}

// Config is a searcher's.
type Config struct {
	Cluster *streams.Cluster
	// Dir keeps the indexes: Dir/<client>/<partition>.
	Dir    string
	Epochs Epochs
	// Wait bounds a search's wait for its After (default DefaultWait).
	Wait time.Duration
	// Discover is how often new clients' feeds are looked for (default
	// and least 5 s, franz-go's least metadata age); a search of a feed
	// the searcher holds nothing of looks for it at once.
	Discover time.Duration
	Metrics  *streams.LoopMetrics
	Logger   *slog.Logger
	// Advertise, if set, is the URL the searcher serves searches at
	// (its process's HTTP): the API finds it by its group membership
	// (Remote) and fans searches out to it.
	Advertise string
	// OnReady, if set, is called once Run runs: an index opens when its
	// partition is assigned, and answers for what it applied (a search
	// waits for what it must see with After or MinVersion).
	OnReady func()
}

// Searcher indexes the feeds and searches them. Safe for concurrent use.
type Searcher struct {
	cfg Config

	mu    sync.Mutex
	parts map[string]map[int32]*partIndex // client -> partition -> index
	held  chan struct{}                   // closed and replaced when parts change
	ready sync.Once
	count map[string]countAt // client -> partitions of its feed
	// client is the loop's Kafka client, asked for a metadata refresh
	// when a search names a feed the searcher holds nothing of yet.
	client atomic.Pointer[kgo.Client]
}

type countAt struct {
	n  int32
	at time.Time
}

// New returns a searcher of cfg; Run feeds it.
func New(cfg Config) *Searcher {
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Discover <= 0 {
		cfg.Discover = 5 * time.Second
	}
	cfg.Discover = max(cfg.Discover, 5*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Searcher{cfg: cfg, parts: map[string]map[int32]*partIndex{}, held: make(chan struct{}), count: map[string]countAt{}}
}

// feedPattern matches every client's search feed.
var feedPattern = "^" + strings.ReplaceAll(topics.SaasPrefix, ".", `\.`) + ".+"

// Run reads the feeds into the indexes until ctx ends, then closes them.
func (s *Searcher) Run(ctx context.Context) error {
	if s.cfg.Epochs == nil || s.cfg.Cluster == nil {
		return errors.New("search: a searcher needs its cluster and the epochs")
	}
	defer s.closeAll()
	s.ready.Do(s.onReady)
	return streams.RunLoop(ctx, streams.LoopConfig{Cluster: s.cfg.Cluster, Group: Group, Topics: []string{feedPattern},
		DeadTopic: topics.DocumentsDead, Logger: s.cfg.Logger, Metrics: s.cfg.Metrics,
		// Positions come from the indexes: the group's commits only make
		// the group hand the partitions out.
		ClientOptions: s.clientOptions(),
		OnRevoked:     s.revoked,
		OnClient:      s.client.Store,
		BatchHandler:  s.handle})
}

func (s *Searcher) clientOptions() []kgo.Opt {
	opts := []kgo.Opt{kgo.ConsumeRegex(), kgo.AdjustFetchOffsetsFn(s.resume), kgo.MetadataMaxAge(s.cfg.Discover)}
	if s.cfg.Advertise != "" {
		opts = append(opts, memberClientID(s.cfg.Advertise))
	}
	return opts
}

func (s *Searcher) onReady() {
	if s.cfg.OnReady != nil {
		s.cfg.OnReady()
	}
}

// resume opens each assigned partition's index and starts it where the
// index left it.
func (s *Searcher) resume(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var names []string
	for topic := range offsets {
		names = append(names, topic)
	}
	ends, err := s.cfg.Cluster.Admin().ListEndOffsets(ctx, names...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("search: the feeds' ends: %w", err)
	}
	for topic, parts := range offsets {
		client, ok := strings.CutPrefix(topic, topics.SaasPrefix)
		if !ok {
			continue
		}
		for p := range parts {
			end, _ := ends.Lookup(topic, p)
			pi, err := s.open(client, p, end.Offset)
			if err != nil {
				return nil, err
			}
			at, _ := pi.position()
			offsets[topic][p] = kgo.NewOffset().At(at)
		}
	}
	return offsets, nil
}

// open returns the index of a client's partition, opened if it is not.
// An end of 0 or more is the feed's end as the partition is assigned
// (partIndex.catchUp): set under the lock that holds the index, so that
// an index Applied reports at that end answers for its partition.
func (s *Searcher) open(client string, partition int32, end int64) (*partIndex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := s.parts[client][partition]
	if pi == nil {
		if err := topics.ValidateClient(client); err != nil {
			return nil, streams.Permanent(fmt.Errorf("search: feed of %q: %w", client, err))
		}
		dir := filepath.Join(s.cfg.Dir, client, strconv.Itoa(int(partition)))
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		var err error
		if pi, err = openPart(dir, client, partition, s.cfg.Logger); err != nil {
			return nil, err
		}
		if s.parts[client] == nil {
			s.parts[client] = map[int32]*partIndex{}
		}
		s.parts[client][partition] = pi
		s.changedLocked()
	}
	if end >= 0 {
		pi.catchUp(end)
	}
	return pi, nil
}

func (s *Searcher) changedLocked() {
	close(s.held)
	s.held = make(chan struct{})
}

// revoked closes the indexes of the partitions taken away.
func (s *Searcher) revoked(revoked map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, parts := range revoked {
		client, _ := strings.CutPrefix(topic, topics.SaasPrefix)
		for _, p := range parts {
			if pi := s.parts[client][p]; pi != nil {
				if err := pi.close(); err != nil {
					s.cfg.Logger.Warn("search: close an index", "client", client, "partition", p, "err", err)
				}
				delete(s.parts[client], p)
			}
		}
	}
	s.changedLocked()
}

func (s *Searcher) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for client, parts := range s.parts {
		for p, pi := range parts {
			if err := pi.close(); err != nil {
				s.cfg.Logger.Warn("search: close an index", "client", client, "partition", p, "err", err)
			}
		}
	}
	s.parts = map[string]map[int32]*partIndex{}
	s.changedLocked()
}

// handle applies a batch of a feed's partition to its index: what it read
// again below the index's position is skipped, a record that does not
// decode is dead-lettered.
func (s *Searcher) handle(ctx context.Context, b *streams.Batch) error {
	client, _ := strings.CutPrefix(b.Topic, topics.SaasPrefix)
	pi, err := s.open(client, b.Partition, -1)
	if err != nil {
		return err
	}
	at, _ := pi.position()
	var changes []change
	next := at
	for _, r := range b.Records {
		if r.Offset < at {
			continue
		}
		next = r.Offset + 1
		pk, ok := strings.CutPrefix(string(r.Key), client+"/")
		if !ok {
			b.Dead(r, fmt.Sprintf("the key %q is not one of %s's (%s/PK)", r.Key, client, client))
			continue
		}
		if r.Value == nil {
			changes = append(changes, change{pk: pk, version: -1})
			continue
		}
		var d schemas.SaasDocument
		if err := schemas.SaasDocuments.Decode(r.Value, &d); err != nil {
			b.Dead(r, "undecodable search document: "+err.Error())
			continue
		}
		if d.PK != pk {
			b.Dead(r, fmt.Sprintf("the key %q and the document's pk %q differ", r.Key, d.PK))
			continue
		}
		c := change{pk: pk, version: d.Version}
		if d.Action != schemas.ActionDelete {
			c.doc = &d
			known, err := s.epoch(ctx, client, d.Epoch)
			if err != nil {
				return err
			}
			if known == nil {
				b.Dead(r, fmt.Sprintf("%s's epoch %d is not registered", client, d.Epoch))
				continue
			}
			c.epoch = known
		}
		changes = append(changes, c)
	}
	if next == at {
		return nil
	}
	if err := pi.apply(changes, next); err != nil {
		return streams.Fatal(fmt.Errorf("search: index %s[%d]: %w", b.Topic, b.Partition, err))
	}
	return nil
}

// epoch returns the schema of a client's epoch, which decides how a
// document of it is indexed: one the searcher has not read yet is waited
// for (the indexer feeds a document only once its epoch is on the log),
// so that an index is built alike whenever it is built. It returns nil
// for an epoch not on the log.
func (s *Searcher) epoch(ctx context.Context, client string, epoch int64) (*schemas.EpochSchema, error) {
	if e, ok := s.cfg.Epochs.Get(client, epoch); ok {
		return e, nil
	}
	if err := s.cfg.Epochs.Sync(ctx, s.cfg.Cluster.Admin()); err != nil {
		return nil, fmt.Errorf("search: read the epochs: %w", err)
	}
	e, _ := s.cfg.Epochs.Get(client, epoch)
	return e, nil
}

// heldParts returns the client's indexes this searcher holds, by partition.
func (s *Searcher) heldParts(client string) map[int32]*partIndex {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.parts[client])
}

// partitions returns how many partitions the client's feed has (cached
// for a few seconds), 0 if it has none.
func (s *Searcher) partitions(ctx context.Context, client string) (int32, error) {
	s.mu.Lock()
	c, ok := s.count[client]
	s.mu.Unlock()
	if ok && time.Since(c.at) < 5*time.Second {
		return c.n, nil
	}
	n, err := streams.PartitionsOf(ctx, s.cfg.Cluster.Admin(), topics.SaasTopic(client))
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.count[client] = countAt{n, time.Now()}
	s.mu.Unlock()
	return n, nil
}

// Applied returns the next offset the searcher has not applied of a
// client's partition, -1 if it does not hold it. A partition held at the
// feed's end as it was assigned, or past it, answers (Search does not
// name it missing).
func (s *Searcher) Applied(client string, partition int32) int64 {
	if pi := s.heldParts(client)[partition]; pi != nil {
		at, _ := pi.position()
		return at
	}
	return -1
}

// discover asks the loop's client to look for new feeds now rather than
// at its next metadata refresh.
func (s *Searcher) discover() {
	if cl := s.client.Load(); cl != nil {
		cl.ForceMetadataRefresh()
	}
}

// wait waits until the searcher has applied pos (or, with v, a version of
// v's pk at least v's, pos being its partition), bounded by the Wait.
func (s *Searcher) wait(ctx context.Context, client string, pos Position, v *PKVersion) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Wait)
	defer cancel()
	for {
		s.mu.Lock()
		pi, held := s.parts[client][pos.Partition], s.held
		s.mu.Unlock()
		applied, changed := int64(-1), (<-chan struct{})(nil)
		if pi == nil {
			s.discover()
		}
		if pi != nil {
			applied, changed = pi.position()
			if v == nil && applied > pos.Offset || v != nil && pi.hasVersion(v.PK, v.Version) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &WaitError{Position: pos, Applied: applied, Version: v}
			}
			return ctx.Err()
		case <-changed:
		case <-held:
		}
	}
}

// Search runs q over the client's documents.
func (s *Searcher) Search(ctx context.Context, client string, q Query) (*Result, error) {
	fields, cur, err := prepare(s.cfg.Epochs, client, &q)
	if err != nil {
		return nil, err
	}
	n, err := s.partitions(ctx, client)
	if err != nil {
		return nil, err
	}
	// A member asked by the API (WithSort) waits only for the partitions
	// it holds: another member answers for the others.
	mine := func(p int32) bool { return !q.WithSort || s.heldParts(client)[p] != nil }
	if q.After != nil && mine(q.After.Partition) {
		if err := s.wait(ctx, client, *q.After, nil); err != nil {
			return nil, err
		}
	}
	if v := q.MinVersion; v != nil {
		if n == 0 {
			return nil, &WaitError{Applied: -1, Version: v} // no feed yet
		}
		if p := streams.Partition(client+"/"+v.PK, n); mine(p) {
			if err := s.wait(ctx, client, Position{Partition: p}, v); err != nil {
				return nil, err
			}
		}
	}
	held := s.heldParts(client)
	for p, pi := range held {
		if !pi.answers() {
			delete(held, p) // catching up: named missing, not answered short
		}
	}
	res := &Result{Hits: []Hit{}}
	if len(held) < int(n) {
		s.discover()
	}
	for p := range n {
		if held[p] == nil {
			res.Partial, res.Missing = true, append(res.Missing, p)
		} else if q.WithSort {
			res.Held = append(res.Held, p)
		}
	}
	now := time.Now()
	bq := q.bleveQuery(fields)
	// Each partition is asked at once (its own index, its own lock).
	type answer struct {
		pi      *partIndex
		matches []*bsearch.DocumentMatch
		total   uint64
		err     error
	}
	answers := make([]answer, 0, len(held))
	for _, pi := range held {
		answers = append(answers, answer{pi: pi})
	}
	order := q.sortOrder(fields)
	var wg sync.WaitGroup
	for i := range answers {
		a := &answers[i]
		wg.Go(func() {
			if q.KNN != nil {
				a.matches, a.err = a.pi.knnHits(&q, bq, now)
				return
			}
			r, err := a.pi.partHits(&q, bq, order, cur, now)
			if err != nil {
				a.err = err
				return
			}
			a.matches, a.total = r.Hits, r.Total
		})
	}
	wg.Wait()
	var matches []*bsearch.DocumentMatch
	owner := map[*bsearch.DocumentMatch]*partIndex{}
	for _, a := range answers {
		if a.err != nil {
			return nil, a.err
		}
		res.Total += a.total
		for _, h := range a.matches {
			owner[h] = a.pi
		}
		matches = append(matches, a.matches...)
	}
	if q.KNN != nil {
		slices.SortFunc(matches, byScore)
		matches = matches[:min(len(matches), q.KNN.K)]
		res.Total = uint64(len(matches))
		from := min(cur.Shown, len(matches))
		page := matches[from:min(from+q.Limit, len(matches))]
		if from+len(page) < len(matches) {
			res.Cursor = cursor{Shown: from + len(page)}.encode()
		}
		matches = page
	} else {
		scoring, desc := order.CacheIsScore(), order.CacheDescending()
		slices.SortStableFunc(matches, func(a, b *bsearch.DocumentMatch) int { return order.Compare(scoring, desc, a, b) })
		more := len(matches) > q.Limit
		matches = matches[:min(len(matches), q.Limit)]
		if more && len(matches) > 0 {
			res.Cursor = cursorAfter(order, matches[len(matches)-1])
		}
	}
	for _, m := range matches {
		d, err := owner[m].document(m.ID, now)
		if err != nil {
			return nil, err
		}
		if d == nil {
			continue // removed meanwhile
		}
		h := Hit{PK: m.ID, Version: d.Version, Score: score(m.Score), Fields: d.Fields}
		if q.WithSort {
			h.Sort, h.Score = m.Sort, m.Score
		}
		res.Hits = append(res.Hits, h)
	}
	return res, nil
}
