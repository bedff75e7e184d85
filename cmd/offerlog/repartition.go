package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/streams/table"
)

func runRepartition(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("repartition", stderr).produces()
	cfg := f.rules()
	f.brokers()
	to := f.Int("to", 0, "the new partition count of the platform's partitioned topics (required)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *to < 1 || f.NArg() != 0 {
		return fmt.Errorf("%w: want --to N and no arguments", errUsage)
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	log := f.logger(stderr)
	scfg := table.Config{Cluster: kafka, StateDir: filepath.Join(cfg.DataDir, "state"), Replication: 1, Logger: log}
	if err := platform.Repartition(ctx, platform.Repartitioning{Config: *cfg, Streams: scfg, To: int32(*to), Logger: log}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "repartitioned the topics to %d partitions: run the platform with --partitions %d, every component on empty local state\n", *to, *to)
	return nil
}
