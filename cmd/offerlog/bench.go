package main

import (
	"context"
	"io"

	"github.com/offerlog/offerlog/internal/bench"
)

func runBench(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("bench", stderr)
	docs := f.Int("docs", 200_000, "documents per scenario")
	partitions := f.Int("partitions", 8, "partitions of every topic")
	f.logLevel = "error"
	if err := f.parse(args); err != nil {
		return err
	}
	return bench.Run(ctx, bench.Config{Docs: *docs, Partitions: int32(*partitions), Only: f.Args(),
		Out: stdout, Logger: f.logger(stderr)})
}
