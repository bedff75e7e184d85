package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/processors/drafts"
	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// ensureTopics makes the topics of ts that are missing.
func ensureTopics(ctx context.Context, brokers []string, replication int16, ts []topics.Topic) error {
	cl, err := streams.NewClient(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := topics.Ensure(ctx, kadm.NewClient(cl), replication, ts); err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	return nil
}

// groups lists the groups replay knows.
const groups = "registry, indexer, numerator, offers, drafts or cabinet; replay offers before cabinet"

func runReplay(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("replay", stderr).produces()
	cfg := f.rules()
	brokers := f.brokers()
	gaps := f.Bool("allow-gaps", false, "replay what retention left of the inputs (without it, a replay refuses to rebuild from a part of the history)")
	f.BoolVar(gaps, "allow-partial", false, "the same as --allow-gaps (its name in 0.4)")
	reemit := f.Bool("reemit", false, "write the group's outputs again, each with the "+streams.ReplayHeader+" header (without it, a replay rebuilds tables only; the indexer, which has no table, needs it)")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := requireBrokers(brokers); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one GROUP (%s)", errUsage, groups)
	}
	log := f.logger(stderr)
	group := f.Arg(0)
	scfg := streams.Config{Brokers: *brokers, StateDir: filepath.Join(cfg.DataDir, "state"), Replication: 1, Logger: log,
		AllowGaps: *gaps, Replaying: streams.ReplayTablesOnly}
	if *reemit {
		scfg.Replaying = streams.ReplayReemit
	}
	var err error
	switch group {
	case string(registry.Group):
		epochs := registry.NewCatalogue(cfg.EpochGrace)
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = epochs.Follow(fctx, *brokers, log) }()
		defer func() { cancel(); <-done }()
		err = registry.Replay(ctx, registry.Config{Streams: scfg, Rules: cfg.Rules, Epochs: epochs, Framing: cfg.ExportFraming, Logger: log},
			cfg.Partitions, cfg.Replication)
		if err != nil {
			return err
		}
	case string(numerator.Group):
		ncfg := cfg.Numerator
		ncfg.Streams, ncfg.Logger = scfg, log
		err = numerator.Replay(ctx, ncfg, cfg.Partitions, cfg.Replication)
	case indexer.Group:
		if !*reemit {
			return fmt.Errorf("%w: the indexer has no table: its replay re-delivers every change to the client feeds; say so with --reemit", errUsage)
		}
		err = indexer.Replay(ctx, indexer.Config{Brokers: *brokers, Partitions: cfg.Partitions,
			Replication: cfg.Replication, Framing: cfg.ExportFraming, Logger: log, AllowGaps: *gaps})
	case string(offers.Group):
		// The aggregate decides stage commands only for configured stages:
		// replay with the stages it ran with (their queues are outputs).
		if err = cfg.Validate(); err == nil {
			err = ensureTopics(ctx, *brokers, cfg.Replication, topics.ForStages(cfg.Stages.Names(), cfg.Stages.PushTopics(), cfg.Partitions))
		}
		if err == nil {
			err = offers.Replay(ctx, offers.Config{Streams: scfg, Stages: cfg.Stages.Names(), Framing: cfg.ExportFraming}, cfg.Partitions, cfg.Replication)
		}
	case string(drafts.Group):
		err = drafts.Replay(ctx, drafts.Config{Streams: scfg}, cfg.Partitions, cfg.Replication)
	case string(cabinet.Group):
		err = cabinet.Replay(ctx, cabinet.Config{Streams: scfg}, cfg.Partitions, cfg.Replication)
	default:
		return fmt.Errorf("%w: unknown group %q (want %s)", errUsage, group, groups)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replayed %s: %s\n", group, scfg.Replaying)
	return nil
}
