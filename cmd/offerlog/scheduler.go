package main

import (
	"context"
	"fmt"
	"io"

	"github.com/offerlog/offerlog/processors/scheduler"
)

// runScheduler runs the scheduler's tools: recrawl.
func runScheduler(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "recrawl" {
		return fmt.Errorf("%w: want recrawl", errUsage)
	}
	f := newFlags("scheduler recrawl", stderr)
	brokers := f.brokers()
	cfg := f.platform()
	stage := f.String("stage", "", "the stage to re-crawl for")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	if err := requireBrokers(brokers); err != nil {
		return err
	}
	stages := cfg.Stages
	if cfg.StagesFile != "" {
		var err error
		if stages, err = scheduler.LoadConfig(cfg.StagesFile); err != nil {
			return err
		}
	}
	if err := stages.Validate(); err != nil {
		return err
	}
	for _, sc := range stages.Stages {
		if sc.Name != *stage {
			continue
		}
		st, closeFn, err := sc.Open()
		if err != nil {
			return err
		}
		defer closeFn()
		n, err := scheduler.Recrawl(ctx, *brokers, sc, st, f.logger(stderr))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "queued %d offers for %s (low priority)\n", n, sc.Name)
		return nil
	}
	return fmt.Errorf("%w: no stage %q configured (have %v)", errUsage, *stage, stages.Names())
}
