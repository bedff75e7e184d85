package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/topics"
)

// cacheTable is the compacted topic of the cache scenario.
const cacheTable = "bench.cache"

// runCache writes env.Keys keys to a compacted table, reads them with a
// plain franz-go consumer (the ceiling), materialises them in a cache
// server (one shard holding every partition), then starts a second replica
// in another data centre and sends Gets of 10 keys through the client of
// the first's from 64 concurrent callers.
func runCache(ctx context.Context, env *Env) (Result, error) {
	n := env.Keys
	if _, err := topics.Ensure(ctx, env.Admin, -1, []topics.Topic{{Name: cacheTable, Partitions: env.Partitions, Compacted: true}}); err != nil {
		return Result{}, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	value := make([]byte, 100)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: cacheTable, Key: []byte(cacheKey(i)), Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		return Result{}, err
	}

	// The ceiling: a plain read of the same partitions.
	start := time.Now()
	rd, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.ConsumeTopics(cacheTable),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return Result{}, err
	}
	for got := 0; got < n; {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			rd.Close()
			return Result{}, err
		}
		got += fs.NumRecords()
	}
	rd.Close()
	plain := Result{Name: "franz-go-read", Records: n, Duration: time.Since(start)}

	var servers []string
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	serve := func(host string) (*serving.Server, time.Duration, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, 0, err
		}
		srv, err := serving.NewServer(serving.ServerConfig{Cluster: env.Cluster, Table: cacheTable, Shards: 1, DC: host, Host: host,
			Owner: serving.Static{Shard: 0}, Logger: env.Logger})
		if err != nil {
			return nil, 0, err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- srv.Serve(sctx, ln) }()
		stops = append(stops, func() { cancel(); <-done })
		servers = append(servers, ln.Addr().String())
		for !srv.Ready() {
			select {
			case err := <-done:
				return nil, 0, fmt.Errorf("cache server stopped: %w", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		return srv, time.Since(start), nil
	}
	_, load, err := serve("a")
	if err != nil {
		return Result{}, err
	}
	if _, _, err := serve("b"); err != nil {
		return Result{}, err
	}

	// The client of data centre "a", as an API pod names its own (--dc):
	// it asks a's replica, and b's only after the hedge or a failure.
	client := serving.NewClient(serving.ClientConfig{Hosts: serving.StaticHosts(servers...), DC: "a", Logger: env.Logger})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go client.Run(cctx)
	for len(client.Shards()) < 2 {
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	end := time.Now().Add(5 * time.Second)
	gets, _, _ := drive(ctx, 64, func(int) bool { return time.Now().Before(end) }, func(i int) error {
		keys := make([]string, 10)
		for j := range keys {
			keys[j] = cacheKey((i*10 + j*7919) % n)
		}
		got, err := client.Get(ctx, keys)
		if err == nil && len(got) != len(keys) {
			err = fmt.Errorf("%d of %d keys found", len(got), len(keys))
		}
		return err
	})
	gets.Name = "gets"
	gets.Note = "Gets of 10 keys through the client of data centre a against 2 replicas (a's and b's) for 5 s; " + gets.Note
	r := Result{Records: n, Duration: load}
	r.Note = fmt.Sprintf("a cache server materialises %d keys (%d bytes each) of %d partitions into memory, timed from its start "+
		"to ready; franz-go-read reads the same partitions with a plain consumer", n, len(value), env.Partitions)
	r.Also = []Result{plain, gets}
	return r, nil
}

func cacheKey(i int) string { return fmt.Sprintf("key-%08d", i) }
