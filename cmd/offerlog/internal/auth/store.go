package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Store holds every token's record, read from auth.tokens. Safe for
// concurrent use.
type Store struct {
	mu   sync.RWMutex
	byID map[string]*schemas.Token
	pos  streams.Position

	ready     chan struct{}
	readyOnce sync.Once
	now       func() time.Time
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{byID: map[string]*schemas.Token{}, ready: make(chan struct{}), now: time.Now}
}

// Put adds or replaces a token's record.
func (s *Store) Put(t *schemas.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[t.ID] = t
}

// Get returns the record of token id.
func (s *Store) Get(id string) (*schemas.Token, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byID[id]
	return t, ok
}

// List returns every record, by creation time.
func (s *Store) List() []*schemas.Token {
	s.mu.RLock()
	out := make([]*schemas.Token, 0, len(s.byID))
	for _, t := range s.byID {
		out = append(out, t)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Authenticate returns the scope of a token's text, or an
// ErrUnauthenticated error saying why it is refused.
func (s *Store) Authenticate(text string) (Scope, error) {
	id, ok := idOf(text)
	if !ok {
		return Scope{}, fmt.Errorf("%w: not an offerlog token (olt_...)", ErrUnauthenticated)
	}
	rec, _ := s.Get(id)
	return verify(rec, text, s.now())
}

// Follow reads auth.tokens from its start and keeps the store up to date
// until ctx is done; Ready is closed once it has read what the topic held
// when it started.
func (s *Store) Follow(ctx context.Context, kafka *streams.Cluster, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- streams.RunLoop(ctx, streams.LoopConfig{Name: "tokens", Cluster: kafka, Topics: []string{topics.AuthTokens},
			Logger: log, BatchHandler: func(_ context.Context, b *streams.Batch) error {
				for _, r := range b.Records {
					if err := s.apply(r); err != nil {
						b.Dead(r, err.Error())
					}
					s.pos.Advance(r.Partition, r.Offset+1)
				}
				return nil
			}})
	}()
	for {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.pos.Sync(sctx, kafka.Admin(), topics.AuthTokens)
		scancel()
		if err == nil {
			s.readyOnce.Do(func() { close(s.ready) })
			break
		}
		select {
		case err := <-errc:
			return err
		default:
		}
		if ctx.Err() != nil {
			break
		}
		log.Warn("tokens: not read to the end yet", "err", err)
	}
	err := <-errc
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (s *Store) apply(r *kgo.Record) error {
	if r.Value == nil {
		s.mu.Lock()
		delete(s.byID, string(r.Key))
		s.mu.Unlock()
		return nil
	}
	var t schemas.Token
	if err := schemas.Tokens.Decode(r.Value, &t); err != nil {
		return fmt.Errorf("undecodable token record: %w", err)
	}
	if t.ID != string(r.Key) {
		return fmt.Errorf("token record of %q keyed %q", t.ID, r.Key)
	}
	s.Put(&t)
	return nil
}

// Ready is closed once the store has read the tokens written before it
// started.
func (s *Store) Ready() <-chan struct{} { return s.ready }

// Sync waits until the store has read every token written before the call.
func (s *Store) Sync(ctx context.Context, adm *kadm.Client) error {
	return s.pos.Sync(ctx, adm, topics.AuthTokens)
}

// Append writes a token's record to auth.tokens and waits for its
// acknowledgement.
func Append(ctx context.Context, p *kgo.Client, t *schemas.Token) error {
	data, err := schemas.Tokens.Encode(t)
	if err != nil {
		return err
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: topics.AuthTokens, Key: []byte(t.ID), Value: data}).FirstErr(); err != nil {
		return fmt.Errorf("append token %s: %w", t.ID, err)
	}
	return nil
}

// ReadAll returns every token's record on auth.tokens, read to its end.
func ReadAll(ctx context.Context, kafka *streams.Cluster) (*Store, error) {
	s := NewStore()
	var errs []string
	err := streams.ReadToEnd(ctx, kafka, topics.AuthTokens, func(r *kgo.Record) {
		if err := s.apply(r); err != nil {
			errs = append(errs, fmt.Sprintf("offset %d: %v", r.Offset, err))
		}
	})
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return s, fmt.Errorf("auth.tokens: %s", strings.Join(errs, "; "))
	}
	return s, nil
}
