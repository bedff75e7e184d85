package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/bench"
)

func runBench(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("bench", stderr).produces()
	docs := f.Int("docs", 200_000, "documents per scenario")
	keys := f.Int("keys", 1_000_000, "offer keys of the numerator scenario")
	offerCount := f.Int("offers", 1_000_000, "offers of the offers scenario")
	burst := f.Int("burst", 1_000_000, "timers due in the same second of the burst scenario")
	sizeOffers := f.Int("size-offers", 5_000_000, "offers of the size scenario (run only when named: offerlog bench size)")
	devDocs := f.Int("dev-docs", 1_000_000, "documents in the tables of the dev scenario's restart")
	devOffers := f.Int("dev-offers", 100_000, "offers in the tables of the dev scenario's restart")
	partitions := f.Int("partitions", 8, "partitions of every topic")
	runs := f.Int("runs", 1, "repeat the whole run this many times, each on a broker of its own, and report the median of each row")
	cpuProfile := f.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := f.String("memprofile", "", "write the allocations of the whole run (allocs profile) to this file")
	ceiling := f.String("goka-ceiling", "", "the goka-ceiling binary the goka ceiling runs in (default: beside offerlog, on the PATH, or built with go)")
	profiles := f.String("profiles", "", "write a CPU and an allocation profile of each scenario to this directory")
	memory := int64(defaultMemory)
	f.Func("memory", fmt.Sprintf("the Go runtime's soft memory limit, as offerlog dev sets it from its --memory (default %s)", formatBytes(defaultMemory)),
		func(s string) error {
			n, err := parseBytes(s)
			memory = n
			return err
		})
	f.logLevel = "error"
	if err := f.parse(args); err != nil {
		return err
	}
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
	return bench.Run(ctx, bench.Config{Client: f.client, Docs: *docs, Keys: *keys, Offers: *offerCount, Burst: *burst, SizeOffers: *sizeOffers,
		DevDocs: *devDocs, DevOffers: *devOffers, Memory: memory, Partitions: int32(*partitions), Only: f.Args(), Runs: *runs,
		ProfileDir: *profiles, GokaCeiling: *ceiling, Out: stdout, Logger: f.logger(stderr)})
}
