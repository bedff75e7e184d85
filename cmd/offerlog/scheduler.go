package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/offerlog/offerlog/processors/scheduler"
)

// runScheduler runs the scheduler's tools: recrawl and redrive.
func runScheduler(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "redrive" {
		return runRedrive(ctx, args[1:], stdin, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "recrawl" {
		return fmt.Errorf("%w: want recrawl or redrive STAGE", errUsage)
	}
	f := newFlags("scheduler recrawl", stderr).produces()
	cfg := f.platform()
	f.brokers()
	stage := f.String("stage", "", "the stage to re-crawl for")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
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
		n, err := scheduler.Recrawl(ctx, kafka, sc, st, f.logger(stderr))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "queued %d offers for %s (low priority)\n", n, sc.Name)
		return nil
	}
	return fmt.Errorf("%w: no stage %q configured (have %v)", errUsage, *stage, stages.Names())
}

// runRedrive queues again the offers of a stage's dead letters.
func runRedrive(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("scheduler redrive", stderr).produces()
	cfg := f.platform()
	f.brokers()
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one STAGE", errUsage)
	}
	// Only a configured stage: the aggregate refuses a command of any
	// other, so its dead letters would be queued to be refused.
	stages := cfg.Stages
	if cfg.StagesFile != "" {
		var err error
		if stages, err = scheduler.LoadConfig(cfg.StagesFile); err != nil {
			return err
		}
	}
	if !slices.Contains(stages.Names(), f.Arg(0)) {
		return fmt.Errorf("%w: no stage %q configured (have %v; --stages names the stages file)", errUsage, f.Arg(0), stages.Names())
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	queued, letters, err := scheduler.Redrive(ctx, kafka, f.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "queued %d offers again for %s (%d dead letters)\n", queued, f.Arg(0), letters)
	return nil
}
