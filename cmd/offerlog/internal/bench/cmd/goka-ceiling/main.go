// Command goka-ceiling runs the goka processor offerlog-bench measures
// beside offerlog's own (package gokaceiling) until it is stopped:
//
//	goka-ceiling --brokers HOST:PORT --state-dir DIR --source TOPIC --out TOPIC
//
// It is a binary of its own so that offerlog-bench links one Kafka client;
// `make bench` builds it and hands it to the bench (--goka-ceiling).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/bench/gokaceiling"
)

func main() {
	brokers := flag.String("brokers", "localhost:9092", "seed brokers, comma-separated")
	state := flag.String("state-dir", "", "the processor's local state")
	source := flag.String("source", "", "the topic it reads")
	out := flag.String("out", "", "the topic it writes")
	flag.Parse()
	if *state == "" || *source == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "goka-ceiling: --state-dir, --source and --out are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := gokaceiling.Run(ctx, strings.Split(*brokers, ","), *state, *source, *out, log); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "goka-ceiling:", err)
		os.Exit(1)
	}
}
