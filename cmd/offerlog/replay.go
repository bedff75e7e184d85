package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/streams/table"
)

func runReplay(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("replay", stderr).produces()
	cfg := f.rules()
	f.brokers()
	gaps := f.Bool("allow-gaps", false, "replay what retention left of the inputs (without it, a replay refuses to rebuild from a part of the history)")
	f.BoolVar(gaps, "allow-partial", false, "the same as --allow-gaps (its name in 0.4)")
	reemit := f.Bool("reemit", false, "write the group's outputs again, each with the "+replay.Header+" header (without it, a replay rebuilds tables only; the indexer, which has no table, needs it)")
	if err := f.parse(args); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	groups := strings.Join(platform.Replayable(), ", ") + " (replay offers before cabinet)"
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one GROUP (%s)", errUsage, groups)
	}
	log := f.logger(stderr)
	setMemoryLimit(platform.GoMemory(*cfg))
	group := f.Arg(0)
	scfg := table.Config{Cluster: kafka, StateDir: filepath.Join(cfg.DataDir, "state"), Replication: 1, Logger: log,
		AllowGaps: *gaps, Replaying: replay.TablesOnly}
	if *reemit {
		scfg.Replaying = replay.Reemit
	}
	err = platform.Replay(ctx, group, platform.Replaying{Config: *cfg, Streams: scfg, Logger: log})
	switch {
	case errors.Is(err, platform.ErrNotReplayable):
		return fmt.Errorf("%w: unknown group %q (want %s)", errUsage, group, groups)
	case errors.Is(err, platform.ErrReemitRequired):
		return fmt.Errorf("%w: %w", errUsage, err)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "replayed %s: %s\n", group, scfg.Replaying)
	return nil
}
