package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// DefaultEpochGrace is how long after its registration a new epoch makes
// documents of older epochs stale. It covers the time the registration takes
// to reach every registry instance, so that a live run and a replay judge a
// document by the same epochs.
const DefaultEpochGrace = 5 * time.Second

// ErrEpochConflict is returned by Catalogue.Check when an epoch is already
// registered with a different schema: epochs are immutable, a new schema
// needs a new epoch.
var ErrEpochConflict = errors.New("epoch already registered with a different schema")

// Catalogue holds every client's epoch schemas, read from the epochs topic.
// It implements Epochs. Safe for concurrent use.
type Catalogue struct {
	grace time.Duration

	mu       sync.RWMutex
	byClient map[string][]*schemas.EpochSchema // sorted by epoch
	consumed map[int32]int64                   // next offset per partition
	synced   time.Time                         // wall time of the last completed Sync
	changed  chan struct{}                     // closed and replaced on every update
}

// NewCatalogue returns an empty catalogue whose new epochs are in force
// grace after their registration.
func NewCatalogue(grace time.Duration) *Catalogue {
	return &Catalogue{grace: grace, byClient: map[string][]*schemas.EpochSchema{},
		consumed: map[int32]int64{}, changed: make(chan struct{})}
}

// Put adds or replaces an epoch schema.
func (c *Catalogue) Put(s *schemas.EpochSchema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(s)
	c.notify()
}

func (c *Catalogue) put(s *schemas.EpochSchema) {
	list := c.byClient[s.Client]
	i := sort.Search(len(list), func(i int) bool { return list[i].Epoch >= s.Epoch })
	if i < len(list) && list[i].Epoch == s.Epoch {
		list[i] = s
		return
	}
	list = append(list, nil)
	copy(list[i+1:], list[i:])
	list[i] = s
	c.byClient[s.Client] = list
}

// Clients returns the clients that have an epoch, sorted.
func (c *Catalogue) Clients() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.byClient))
}

func (c *Catalogue) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Get returns the schema of a client's epoch, whenever it was registered.
func (c *Catalogue) Get(client string, epoch int64) (*schemas.EpochSchema, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, s := range c.byClient[client] {
		if s.Epoch == epoch {
			return s, true
		}
	}
	return nil, false
}

// Lookup implements Epochs.
func (c *Catalogue) Lookup(client string, epoch int64, at time.Time) (*schemas.EpochSchema, bool) {
	s, ok := c.Get(client, epoch)
	if !ok || s.RegisteredAt.After(at) {
		return nil, false
	}
	return s, true
}

// Current implements Epochs: the newest epoch registered at least the grace
// period before at.
func (c *Catalogue) Current(client string, at time.Time) (int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var cur int64
	found := false
	for _, s := range c.byClient[client] {
		if !s.RegisteredAt.Add(c.grace).After(at) && (!found || s.Epoch > cur) {
			cur, found = s.Epoch, true
		}
	}
	if !found {
		// A client whose only epochs are still in their grace period is
		// known; it has no epoch in force that could make a document stale.
		if len(c.byClient[client]) > 0 {
			return -1, true
		}
	}
	return cur, found
}

// Check compares a schema about to be registered with what the catalogue
// holds: it returns the registered schema and nil if the same epoch has the
// same fields and embeddings, nil and nil if the epoch is new, and
// ErrEpochConflict if it differs.
func (c *Catalogue) Check(s *schemas.EpochSchema) (*schemas.EpochSchema, error) {
	old, ok := c.Get(s.Client, s.Epoch)
	if !ok {
		return nil, nil
	}
	if sameSchema(old, s) {
		return old, nil
	}
	return nil, fmt.Errorf("client %q epoch %d: %w", s.Client, s.Epoch, ErrEpochConflict)
}

func sameSchema(a, b *schemas.EpochSchema) bool {
	if len(a.Fields) != len(b.Fields) || len(a.Embeddings) != len(b.Embeddings) || a.Analyzer != b.Analyzer {
		return false
	}
	for i := range a.Fields {
		if a.Fields[i] != b.Fields[i] {
			return false
		}
	}
	for i := range a.Embeddings {
		if a.Embeddings[i] != b.Embeddings[i] {
			return false
		}
	}
	return true
}

// List returns the epochs of client, oldest first.
func (c *Catalogue) List(client string) []*schemas.EpochSchema {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]*schemas.EpochSchema(nil), c.byClient[client]...)
}

// Follow reads the epochs topic from its start and keeps the catalogue up to
// date until ctx is done. It returns nil when ctx is cancelled, or the error
// that stopped it. A record that is not an epoch schema is logged and
// skipped (every reader of the catalogue reads it; the registry's API
// refuses such records before they are written).
func (c *Catalogue) Follow(ctx context.Context, kafka *streams.Cluster, log *slog.Logger, opts ...kgo.Opt) error {
	return streams.RunLoop(ctx, streams.LoopConfig{Name: "epochs", Cluster: kafka, Topics: []string{topics.Epochs}, Logger: log,
		ClientOptions: opts, BatchHandler: func(_ context.Context, b *streams.Batch) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, r := range b.Records {
				c.consumed[r.Partition] = r.Offset + 1
				if r.Value == nil {
					continue // a deleted key: epochs are never deleted by offerlog
				}
				var s schemas.EpochSchema
				if err := schemas.EpochSchemas.Decode(r.Value, &s); err != nil {
					b.Dead(r, fmt.Sprintf("undecodable epoch schema: %v", err))
					continue
				}
				c.put(&s)
			}
			c.notify()
			return nil
		}})
}

// Sync waits until the catalogue has read the epochs topic up to its end
// offsets as of the call. It returns ctx's error if ctx ends first.
func (c *Catalogue) Sync(ctx context.Context, adm *kadm.Client) error {
	start := time.Now()
	ends, err := streams.EndOffsets(ctx, adm, topics.Epochs)
	if err != nil {
		return fmt.Errorf("epochs: %w", err)
	}
	for {
		c.mu.Lock()
		behind := false
		for p, end := range ends {
			if c.consumed[p] < end {
				behind = true
			}
		}
		wait := c.changed
		if !behind && c.synced.Before(start) {
			c.synced = start
			c.notify()
		}
		c.mu.Unlock()
		if !behind {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	}
}

// KeepSynced syncs the catalogue every interval until ctx ends, so that
// SyncedAt trails the clock by about that much: the registry's callbacks
// wait for it (WaitSynced) instead of calling the broker themselves. A sync
// that fails is logged and tried again after a wait that doubles, up to 5 s,
// while syncs fail.
func (c *Catalogue) KeepSynced(ctx context.Context, adm *kadm.Client, every time.Duration, log *slog.Logger) {
	wait := every
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Sync(sctx, adm)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// The broker is away: ask less often while it is.
			wait = min(2*wait, 5*time.Second)
			log.Warn("epochs: catalogue not synced, trying again", "err", err, "in", wait)
		default:
			wait = every
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// WaitSynced waits, without calling the broker, until a Sync that began at
// t or later has completed: every epoch registered before t is then in the
// catalogue. It returns ctx's error if ctx ends first.
func (c *Catalogue) WaitSynced(ctx context.Context, t time.Time) error {
	for {
		c.mu.RLock()
		done, wait := !c.synced.Before(t), c.changed
		c.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	}
}

// SyncedAt returns when the last Sync began that completed: every epoch
// registered before it is in the catalogue.
func (c *Catalogue) SyncedAt() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced
}
