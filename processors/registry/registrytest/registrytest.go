// Package registrytest holds the registry's fixtures for tests of other
// packages.
package registrytest

import (
	"context"
	"testing"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/registry"
)

// FollowEpochs returns a catalogue following the epochs topic until the
// test ends.
func FollowEpochs[K testkit.Kafka](t testing.TB, brokers K) *registry.Catalogue {
	t.Helper()
	epochs := registry.NewCatalogue(registry.DefaultEpochGrace)
	kafka := testkit.ClusterOf(t, brokers)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = epochs.Follow(ctx, kafka, testkit.Logger()) }()
	t.Cleanup(func() { cancel(); <-done })
	return epochs
}
