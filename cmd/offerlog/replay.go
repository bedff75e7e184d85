package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/streams"
)

func runReplay(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("replay", stderr)
	brokers := f.brokers()
	cfg := f.platform()
	if err := f.parse(args); err != nil {
		return err
	}
	if err := requireBrokers(brokers); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one GROUP (%s, %s or %s)", errUsage, registry.Group, indexer.Group, numerator.Group)
	}
	log := f.logger(stderr)
	group := f.Arg(0)
	switch group {
	case string(registry.Group):
		epochs := registry.NewCatalogue(cfg.EpochGrace)
		fc, err := registry.NewFollowClient(*brokers)
		if err != nil {
			return err
		}
		defer fc.Close()
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = epochs.Follow(fctx, fc, log) }()
		defer func() { cancel(); <-done }()
		err = registry.Replay(ctx, registry.Config{
			Streams: streams.Config{Brokers: *brokers, StateDir: filepath.Join(cfg.DataDir, "state"), Replication: 1, Logger: log},
			Rules:   cfg.Rules, Epochs: epochs, Logger: log,
		}, cfg.Partitions, cfg.Replication)
		if err != nil {
			return err
		}
	case string(numerator.Group):
		ncfg := cfg.Numerator
		ncfg.Streams = streams.Config{Brokers: *brokers, StateDir: filepath.Join(cfg.DataDir, "state"), Replication: 1, Logger: log}
		ncfg.Logger = log
		if err := numerator.Replay(ctx, ncfg, cfg.Partitions, cfg.Replication); err != nil {
			return err
		}
	case indexer.Group:
		if err := indexer.Replay(ctx, indexer.Config{Brokers: *brokers, Partitions: cfg.Partitions,
			Replication: cfg.Replication, Logger: log}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown group %q (want %s, %s or %s)", errUsage, group, registry.Group, indexer.Group, numerator.Group)
	}
	fmt.Fprintf(stdout, "replayed %s\n", group)
	return nil
}
