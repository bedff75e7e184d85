package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

func ensure(ctx context.Context, env *Env, names ...string) error {
	var ts []topics.Topic
	for _, n := range names {
		ts = append(ts, topics.Topic{Name: n, Partitions: env.Partitions, Retention: topics.Forever})
	}
	_, err := topics.Ensure(ctx, env.Admin, -1, ts)
	return err
}

// waitRecords polls until topic holds at least n records.
func waitRecords(ctx context.Context, adm *kadm.Client, n int64, topic string) error {
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			var total int64
			ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
			if total >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// recordsIn returns how many records topic holds up to its end offsets.
func recordsIn(ctx context.Context, env *Env, topic string) (int64, error) {
	ends, err := streams.EndOffsets(ctx, env.Admin, topic)
	var total int64
	for _, o := range ends {
		total += o
	}
	return total, err
}

// waitAsync runs waitRecords in a goroutine and delivers its result.
func waitAsync(ctx context.Context, env *Env, n int64, topic string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- waitRecords(ctx, env.Admin, n, topic) }()
	return ch
}

// indexedAsync waits, in a goroutine, until the indexer has handled n
// documents, and delivers the result: the archive (yt.<client>) holds a
// record of each, and the indexer's group has committed what
// documents.changes holds then, so the search feed's records of them are
// written too. The feed itself is not counted: it takes only the current
// versions, and a version followed by another of its key in one of the
// indexer's batches is superseded (the bench's documents have four
// versions a key), as many as the batches' sizes make.
func indexedAsync(ctx context.Context, env *Env, n int64) <-chan error {
	ch := make(chan error, 1)
	go func() {
		err := waitRecords(ctx, env.Admin, n, topics.YtTopic(client))
		if err == nil {
			err = committedAll(ctx, env, indexer.Group, topics.DocumentsChanges)
		}
		ch <- err
	}()
	return ch
}

// stamps returns the timestamps of every record of topic (up to its end
// offsets now), sorted. A scenario's duration runs from the first timestamp
// of its first stage's output to the last of its last stage's, by the
// clocks of its producers, so start-up is left out of every figure alike.
func stamps(ctx context.Context, env *Env, topic string) ([]time.Time, error) {
	recs, err := records(ctx, env, topic)
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, len(recs))
	for i, r := range recs {
		out[i] = r.Timestamp
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out, nil
}

// records returns every record of topic up to its end offsets now (a
// compacted topic's tail that holds nothing is not waited for).
func records(ctx context.Context, env *Env, topic string) ([]*kgo.Record, error) {
	var out []*kgo.Record
	err := streams.ReadToEnd(ctx, env.Cluster, topic, func(r *kgo.Record) { out = append(out, r) })
	return out, err
}

// spanOf returns the time from the first record of from to the last of to.
// (A compacted topic may hold fewer records than were written, never fewer
// than the last one.)
func spanOf(ctx context.Context, env *Env, from, to string) (time.Duration, error) {
	first, err := stamps(ctx, env, from)
	if err != nil {
		return 0, err
	}
	last, err := stamps(ctx, env, to)
	if err != nil {
		return 0, err
	}
	if len(first) == 0 || len(last) == 0 {
		return 0, fmt.Errorf("bench: %d records in %s, %d in %s", len(first), from, len(last), to)
	}
	return last[len(last)-1].Sub(first[0]), nil
}

func runCopy(ctx context.Context, env *Env) (Result, error) {
	const out = "bench.copy"
	if err := ensure(ctx, env, out); err != nil {
		return Result{}, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.ConsumerGroup("bench-copy"),
		kgo.ConsumeTopics(env.Source), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	copied := 0
	for copied < env.Docs {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		recs := fs.Records()
		outs := make([]*kgo.Record, len(recs))
		for i, r := range recs {
			outs[i] = &kgo.Record{Topic: out, Key: r.Key, Value: r.Value}
		}
		if err := cl.ProduceSync(ctx, outs...).FirstErr(); err != nil {
			return Result{}, err
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return Result{}, err
		}
		copied += len(recs)
	}
	d, err := spanOf(ctx, env, out, out)
	return Result{Records: copied, Duration: d}, err
}

// runGoka runs the goka ceiling (package gokaceiling) in a process of its
// own: offerlog's binary links no goka and no sarama.
func runGoka(ctx context.Context, env *Env) (Result, error) {
	const out = "bench.goka-out"
	if err := ensure(ctx, env, out); err != nil {
		return Result{}, err
	}
	bin, err := gokaCeiling(ctx, env)
	if err != nil {
		return Result{}, err
	}
	return runUntil(ctx, env, out, func(ctx context.Context) error {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "--brokers", strings.Join(env.Brokers, ","), "--state-dir", env.StateDir,
			"--source", env.Source, "--out", out)
		cmd.Stderr = &stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = 20 * time.Second
		if err := cmd.Run(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w: %s", bin, err, stderr.Bytes())
		}
		return nil
	})
}

// gokaCeiling returns the goka-ceiling binary: env's, the one beside this
// binary or on the PATH, or one built now with the go command.
func gokaCeiling(ctx context.Context, env *Env) (string, error) {
	if env.GokaCeiling != "" {
		return env.GokaCeiling, nil
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), "goka-ceiling"); fileExists(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("goka-ceiling"); err == nil {
		return p, nil
	}
	p := filepath.Join(env.binDir, "goka-ceiling")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "build", "-o", p, "github.com/offerlog/offerlog/cmd/offerlog/internal/bench/cmd/goka-ceiling")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("no goka-ceiling binary (--goka-ceiling, beside offerlog-bench or on the PATH; make bench builds it), and go build failed: %w: %s", err, out.Bytes())
	}
	env.GokaCeiling = p
	return p, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// runUntil runs run from now until the topic holds env.Docs records.
func runUntil(ctx context.Context, env *Env, topic string, run func(context.Context) error) (Result, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- run(runCtx) }()
	select {
	case err := <-waitAsync(runCtx, env, int64(env.Docs), topic):
		cancel()
		<-errc
		if err != nil {
			return Result{}, err
		}
		d, err := spanOf(ctx, env, topic, topic)
		return Result{Records: env.Docs, Duration: d}, err
	case err := <-errc:
		if err == nil {
			err = errors.New("stopped early")
		}
		return Result{}, err
	}
}

func runPipeline(ctx context.Context, env *Env) (Result, error) {
	// The epoch of the bench client, then the same documents as the source.
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	data, err := schemas.EpochSchemas.Encode(epochSchema())
	if err != nil {
		return Result{}, err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.Epochs, Key: []byte(client + "/1"), Value: data}).FirstErr(); err != nil {
		return Result{}, err
	}
	if _, err := topics.Ensure(ctx, env.Admin, -1, topics.ForClient(client, env.Partitions)); err != nil {
		return Result{}, err
	}
	if err := writeDocs(ctx, env.Brokers, topics.DocumentsIngest, env.Docs, 0); err != nil {
		return Result{}, err
	}

	epochs := registry.NewCatalogue(registry.DefaultEpochGrace)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); _ = epochs.Follow(runCtx, env.Cluster, env.Logger) }()

	scfg := table.Config{Cluster: env.Cluster, StateDir: env.StateDir, Replication: 1, Logger: env.Logger}
	errc := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errc <- registry.Run(runCtx, registry.Config{Streams: scfg, Rules: registry.DefaultRules(), Epochs: epochs, Logger: env.Logger})
	}()
	go func() {
		defer wg.Done()
		errc <- indexer.Run(runCtx, indexer.Config{Cluster: env.Cluster, Partitions: env.Partitions, Replication: -1, Logger: env.Logger})
	}()
	wait := func(n int64) error {
		select {
		case err := <-indexedAsync(runCtx, env, n):
			return err
		case err := <-errc:
			return fmt.Errorf("a processor stopped: %w", err)
		}
	}
	if err := wait(int64(env.Docs)); err != nil {
		return Result{}, err
	}
	// From the registry's first verdict to the indexer's last feed record.
	d, err := spanOf(ctx, env, topics.DocumentsResults, topics.SaasTopic(client))
	if err != nil {
		return Result{}, err
	}
	res := Result{Records: env.Docs, Duration: d}

	// Latency at a steady rate: a fifth of the measured throughput.
	rate := min(res.Rate()/5, 5000)
	n := min(env.Docs/10, 20_000)
	lat, err := measureLatency(runCtx, env, cl, n, rate, func() error {
		return wait(int64(env.Docs + n))
	})
	if err != nil {
		return Result{}, err
	}
	res.Latencies = lat
	res.Note = fmt.Sprintf("throughput over a backlog of %d documents, from the registry's first verdict to the indexer's last search feed record; "+
		"latency: %d more documents posted at %.0f/s, from the ingest record's timestamp to the search feed record's", env.Docs, n, rate)
	return res, nil
}

// measureLatency produces n more documents at rate per second and returns,
// per document, the time from its ingest timestamp to its search feed
// record's timestamp.
func measureLatency(ctx context.Context, env *Env, cl *kgo.Client, n int, rate float64, done func() error) ([]time.Duration, error) {
	ends, err := env.Admin.ListEndOffsets(ctx, topics.SaasTopic(client))
	if err != nil {
		return nil, err
	}
	start := map[string]map[int32]kgo.Offset{topics.SaasTopic(client): {}}
	ends.Each(func(o kadm.ListedOffset) { start[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	sent := make(map[int64]time.Time, n)
	var mu sync.Mutex
	interval := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(interval)
	for i := env.Docs; i < env.Docs+n; i++ {
		<-tick.C
		d := doc(i, time.Now().UTC().Truncate(time.Millisecond))
		data, err := schemas.RawDocuments.Encode(d)
		if err != nil {
			return nil, err
		}
		rec := &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte(client + "/" + d.PK), Value: data, Timestamp: time.Now()}
		mu.Lock()
		sent[d.Version] = rec.Timestamp
		mu.Unlock()
		cl.Produce(ctx, rec, nil)
	}
	tick.Stop()
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	if err := done(); err != nil {
		return nil, err
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.ConsumePartitions(start))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	out := make([]time.Duration, 0, n)
	for len(out) < n {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			var s schemas.SaasDocument
			if schemas.SaasDocuments.Decode(r.Value, &s) != nil {
				return
			}
			if at, ok := sent[s.Version]; ok {
				out = append(out, r.Timestamp.Sub(at))
			}
		})
	}
	return out, nil
}

// onOwnBroker returns a copy of env on an embedded broker of its own,
// started in dir with the catalogue's topics and extra ones; stop closes
// it. A scenario that measures processes one by one (scale), or whose
// records would stay in the shared broker for the scenarios after it (the
// burst's million timers, which no aggregate removes there, and their
// ENQUEUEs), runs there.
func onOwnBroker(ctx context.Context, env *Env, dir string, extra ...topics.Topic) (own *Env, stop func(), err error) {
	addrs, stopBroker, err := startBroker(ctx, filepath.Join(dir, "broker"), env.Cluster.Settings().MaxRecordBytes)
	if err != nil {
		return nil, nil, err
	}
	kafka, err := streams.NewCluster(addrs, nil, env.Cluster.Settings())
	if err != nil {
		stopBroker()
		return nil, nil, err
	}
	stop = func() { kafka.Close(); stopBroker() }
	e := *env
	e.Brokers, e.Cluster, e.Admin, e.StateDir, e.BrokerDir = addrs, kafka, kafka.Admin(), dir, filepath.Join(dir, "broker", "broker")
	if _, err := topics.Ensure(ctx, e.Admin, -1, append(topics.Catalogue(env.Partitions), extra...)); err != nil {
		stop()
		return nil, nil, err
	}
	return &e, stop, nil
}
