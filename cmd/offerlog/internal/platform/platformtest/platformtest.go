// Package platformtest starts a platform process for a test.
package platformtest

import (
	"context"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/testkit"
)

// Config returns the configuration of a test platform in dataDir: every
// address a free port, 4 partitions, test logging.
func Config(dataDir string) platform.Config {
	cfg := platform.DefaultConfig()
	cfg.DataDir, cfg.KafkaAddr, cfg.HTTPAddr, cfg.GRPCAddr, cfg.Cache.Addr = dataDir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Partitions = 4
	// Tests of auth turn it on (security_test.go); the others call as admin.
	cfg.Insecure = true
	cfg.WaitTimeout = 20 * time.Second
	// A search waits for what the test wrote (the searcher finds a new
	// client's feed within its metadata refresh, 10 s).
	cfg.SearchWait = 30 * time.Second
	cfg.Logger = testkit.Logger()
	return cfg
}

// Running is a platform started by a test.
type Running struct {
	Info platform.Info
	stop func() error
}

// Start runs a platform of cfg until the test ends (or Stop), once it has
// started: every component ready.
func Start(t testing.TB, cfg platform.Config) *Running {
	t.Helper()
	started := make(chan platform.Info, 1)
	cfg.Started = func(i platform.Info) { started <- i }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- platform.Run(ctx, cfg) }()
	r := &Running{}
	select {
	case r.Info = <-started:
	case err := <-errc:
		cancel()
		t.Fatalf("platform stopped before it started: %v", err)
	case <-time.After(2 * time.Minute):
		cancel()
		t.Fatal("platform not started after 2 minutes")
	}
	done := false
	var runErr error
	r.stop = func() error {
		if !done {
			done = true
			cancel()
			runErr = <-errc
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("platform stopped with %v", err)
		}
	})
	return r
}

// Stop stops the platform and returns what Run returned.
func (r *Running) Stop() error { return r.stop() }
