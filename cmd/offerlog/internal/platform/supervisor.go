package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/streams"
)

// supervisor starts every background goroutine of the platform, so that
// shutdown waits for all of them. A restartable component that fails is
// started again with backoff; any other failure stops the platform.
type supervisor struct {
	log *slog.Logger
	// restarts counts restarts by component (nil: not counted).
	restarts *metrics.CounterVec

	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	down   map[string]error // components waiting to be restarted
	failed chan struct{}
	once   sync.Once
}

func (s *supervisor) Failed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = make(chan struct{})
	}
	return s.failed
}

func (s *supervisor) fail(name string, err error) {
	s.mu.Lock()
	s.err = errors.Join(s.err, fmt.Errorf("%s: %w", name, err))
	if s.failed == nil {
		s.failed = make(chan struct{})
	}
	ch := s.failed
	s.mu.Unlock()
	s.once.Do(func() { close(ch) })
}

// Restarting returns an error naming the components waiting for their
// restart, or nil.
func (s *supervisor) Restarting() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for name, err := range s.down {
		errs = append(errs, fmt.Errorf("%s restarting after: %w", name, err))
	}
	return errors.Join(errs...)
}

func (s *supervisor) setDown(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.down, name)
		return
	}
	if s.down == nil {
		s.down = map[string]error{}
	}
	s.down[name] = err
}

// Err returns the joined errors of the goroutines that failed.
func (s *supervisor) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Go runs fn until ctx is done. With restart, an error is logged and fn runs
// again after a backoff of 1 s doubling to 30 s, jittered; without, it
// stops the platform.
func (s *supervisor) Go(ctx context.Context, name string, restart bool, fn func(context.Context) error) {
	s.wg.Go(func() { s.Run(ctx, name, restart, fn) })
}

// Run is Go's loop, on the caller's goroutine: it returns once ctx is
// done, or once fn failed without restart.
func (s *supervisor) Run(ctx context.Context, name string, restart bool, fn func(context.Context) error) {
	restarts := streams.Backoff{Initial: time.Second, Max: 30 * time.Second}
	attempt := 0
	for {
		start := time.Now()
		err := fn(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("stopped unexpectedly")
		}
		if !restart {
			s.log.Error("component failed", "component", name, "err", err)
			s.fail(name, err)
			return
		}
		if time.Since(start) > time.Minute {
			attempt = 0 // it ran a while: start the waits over
		}
		attempt++
		backoff := restarts.Wait(attempt)
		s.log.Error("component failed, restarting", "component", name, "in", backoff, "err", err)
		if s.restarts != nil {
			s.restarts.With(name).Inc()
		}
		s.setDown(name, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		s.setDown(name, nil)
	}
}

// Wait waits for every goroutine started with Go.
func (s *supervisor) Wait() { s.wg.Wait() }
