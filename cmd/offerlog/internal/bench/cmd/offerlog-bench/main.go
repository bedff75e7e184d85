// Command offerlog-bench runs offerlog's benchmarks (`make bench`): every
// scenario on an embedded broker in a process of its own, with the ceilings of the same run (a
// plain franz-go copy, a goka processor in cmd/goka-ceiling), and prints
// the figures:
//
//	offerlog-bench [--runs N] [--docs N] ... [SCENARIO...]
//
// It is built from the bench's own module, so that the offerlog binary
// carries neither the bench nor goka and sarama.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/bench"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/streams"
)

func main() {
	if bench.ServeBrokerIfAsked() {
		return // this process was the bench's broker
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "offerlog-bench:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "offerlog-bench:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := flag.NewFlagSet("offerlog-bench", flag.ContinueOnError)
	f.SetOutput(stderr)
	docs := f.Int("docs", 200_000, "documents per scenario")
	keys := f.Int("keys", 1_000_000, "offer keys of the numerator scenario")
	offerCount := f.Int("offers", 1_000_000, "offers of the offers scenario")
	burst := f.Int("burst", 1_000_000, "timers due in the same second of the burst scenario")
	sizeOffers := f.Int("size-offers", 5_000_000, "offers of the size scenario (run only when named: offerlog-bench size)")
	devDocs := f.Int("dev-docs", 1_000_000, "documents in the tables of the dev scenario's restart")
	devOffers := f.Int("dev-offers", 100_000, "offers in the tables of the dev scenario's restart")
	partitions := f.Int("partitions", 8, "partitions of every topic")
	runs := f.Int("runs", 1, "repeat the whole run this many times, each on a broker of its own, and report the median of each row")
	cpuProfile := f.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := f.String("memprofile", "", "write the allocations of the whole run (allocs profile) to this file")
	ceiling := f.String("goka-ceiling", "", "the goka-ceiling binary the goka ceiling runs in (default: beside offerlog-bench, on the PATH, or built with go)")
	profiles := f.String("profiles", "", "write a CPU and an allocation profile of each scenario to this directory")
	logLevel := f.String("log-level", "error", "log level: debug, info, warn or error")
	var client streams.ClientSettings
	f.StringVar(&client.Compression, "compression", "none", "compression of what the bench produces: none, gzip, snappy, lz4 or zstd")
	memory := int64(platform.DefaultMemory)
	f.Func("memory", fmt.Sprintf("the Go runtime's soft memory limit, as offerlog dev sets it from its --memory (default %s)", platform.FormatMemory(platform.DefaultMemory)),
		func(s string) error {
			n, err := platform.ParseMemory(s)
			memory = n
			return err
		})
	// Flags may come before and after the scenarios.
	var only []string
	for rest := args; ; {
		if err := f.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if rest = f.Args(); len(rest) == 0 {
			break
		}
		only, rest = append(only, rest[0]), rest[1:]
	}
	client, err := client.WithDefaults()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *cpuProfile != "" {
		out, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			if out, err := os.Create(*memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(out, 0)
				out.Close()
			}
		}()
	}
	return bench.Run(ctx, bench.Config{Client: client, Docs: *docs, Keys: *keys, Offers: *offerCount, Burst: *burst, SizeOffers: *sizeOffers,
		DevDocs: *devDocs, DevOffers: *devOffers, Memory: memory, Partitions: int32(*partitions), Only: only, Runs: *runs,
		ProfileDir: *profiles, GokaCeiling: *ceiling, Out: stdout, Logger: logger})
}
