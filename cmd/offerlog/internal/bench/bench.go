// Package bench is offerlog's benchmark harness: it starts an in-process
// embedded broker, prepares the same records for every scenario, runs the
// scenarios one after the other and prints their figures with the ratio of
// each pipeline to the ceilings measured in the same run (a plain franz-go
// copy, a trivial goka processor).
//
// Adding a scenario is adding a Scenario to Scenarios: a name, whether it is
// a ceiling, and a Run that gets the Env and returns a Result.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// Env is what a scenario runs in.
type Env struct {
	Brokers []string
	// Cluster is the cluster of Brokers, for offerlog's own parts; the
	// ceilings (a plain franz-go copy, goka) use Brokers as a user would.
	Cluster    *streams.Cluster
	Partitions int32
	// Docs is the number of documents of the run.
	Docs int
	// Keys is the number of offer keys of the numerator scenario.
	Keys int
	// Offers is the number of offers of the offers scenario.
	Offers int
	// Burst is the number of timers due in the same second of the burst
	// scenario.
	Burst int
	// SizeOffers is the number of offers of the size scenario.
	SizeOffers int
	// BrokerDir is the embedded broker's data directory (its segments).
	BrokerDir string
	// DevDocs and DevOffers are what the dev scenario loads into the
	// tables of offerlog dev before it restarts it.
	DevDocs, DevOffers int
	// WaitRate and WaitFor are the dev scenario's ?wait=true load (0:
	// DefaultWaitRate for DefaultWaitFor).
	WaitRate int
	WaitFor  time.Duration
	// Source is a topic that holds the run's Docs documents, keyed
	// "client/pk", written once before the scenarios run.
	Source string
	// StateDir is a fresh directory for the scenario's local state.
	StateDir string
	// GokaCeiling is the goka-ceiling binary (Config.GokaCeiling).
	GokaCeiling string
	binDir      string
	Logger      *slog.Logger
	Admin       *kadm.Client
}

// Result is what a scenario measured.
type Result struct {
	// Name tells apart the rows of one scenario (see Also).
	Name     string
	Records  int
	Duration time.Duration
	// Latencies, if measured, are per-record end-to-end latencies.
	Latencies []time.Duration
	// Failed, if counted, are the requests that got no answer (or were
	// not sent: an open loop's beyond its bound), left out of Latencies.
	Failed int
	// Note is printed beside the figures.
	Note string
	// Also are further rows of the scenario, printed as scenario/Name.
	Also []Result
	// BytesPerKey, if measured, is the table state on disk per key.
	BytesPerKey float64
	// RSS is the bench process's resident memory after the scenario
	// (every scenario runs in this process: the offers one runs the whole
	// platform, as offerlog dev does).
	RSS int64
	// cpuPerDoc and busy, if measured, are the process's CPU time per
	// record and the cores it kept busy on average (the scale scenario).
	cpuPerDoc time.Duration
	busy      float64
}

// Rate returns records per second.
func (r Result) Rate() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Records) / r.Duration.Seconds()
}

// Percentile returns the p-th percentile (0-100) of the latencies, or 0.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	l := slices.Clone(r.Latencies)
	slices.Sort(l)
	i := int(float64(len(l)-1) * p / 100)
	return l[i]
}

// Scenario is one benchmark.
type Scenario struct {
	Name string
	// Ceiling marks the reference scenarios every other one is compared to.
	Ceiling bool
	Doc     string
	Run     func(ctx context.Context, env *Env) (Result, error)
	// NoStores marks a scenario of components that keep no local table
	// stores (the cache): as such a process, it runs with the whole
	// budget as the Go runtime's soft limit, the others with the half
	// platform.GoMemory leaves them.
	NoStores bool
	// Explicit marks a scenario run only when named (the size scenario:
	// long, and heavy on the disk); a run of explicit scenarios alone
	// skips the ceilings and the documents they read.
	Explicit bool
}

// Scenarios lists every scenario, ceilings first. Every scenario's duration
// runs from the first record its first stage writes to the last record its
// last stage writes (by record timestamps), so start-up (group joins, goka's
// recovery) is left out of every figure alike.
var Scenarios = []Scenario{
	{Name: "copy", Ceiling: true, Doc: "franz-go consumer group copying the documents to another topic (acks=all, commit per poll)", Run: runCopy},
	{Name: "goka", Ceiling: true, Doc: "goka processor counting per key in its table and emitting each record (acks=all)", Run: runGoka},
	{Name: "pipeline", Doc: "documents.ingest -> registry -> indexer -> saas.<client> and yt.<client>: backlog throughput, then end-to-end latency at a steady rate", Run: runPipeline},
	{Name: "scale", Doc: "the pipeline with 1, 2 and 4 members of each group, each run on a broker of its own: how it grows with processes", Run: runScale},
	{Name: "numerator", Doc: "numerator: doc_ids for new keys across 16 shards, then a generation with 5% new and 5% vanished keys", Run: runNumerator},
	{Name: "cache", NoStores: true, Doc: "serving cache: materialise a table of --keys keys in a server, then Gets of 10 keys from 64 callers against 2 replicas", Run: runCache},
	{Name: "search", Doc: "searcher: index --docs documents of a feed (3 fields, a 32-dimension embedding) against raw Bleve, then word, filter and kNN queries while the feed grows, and a write's time to be found", Run: runSearch},
	{Name: "burst", Doc: "timer burst: --burst timers of one stage due in the same second, fired while another stage's probe timers fall due every 10 ms", Run: runBurst},
	{Name: "scheduler", Doc: "stage scheduler: --keys pending timers, three external stages on offers created at 5 000/s, timer lateness meanwhile", Run: runSchedulerBench},
	{Name: "offers", Doc: "offer storage: load offers into the aggregate, API writes and reads by id (and the same reads of a trivial Go server), replay of the aggregate", Run: runOffers},
	{Name: "seller", Doc: "the cabinet of one seller of --offers offers (gost.md's largest, about a million): their creations counted over 10 keys, then on one key as before 0.5.0", Run: runSeller},
	{Name: "size", Explicit: true, Doc: "GOST at its size: --size-offers offers of a realistic mix loaded, then bytes per offer (broker, " +
		"stores, cache memory), restart, restore onto an empty disk, writes and reads, reads through a cache shard, replay; " +
		"projected to 50 M offers (only when named: offerlog-bench size)", Run: runSize},
	{Name: "dev", Doc: "offerlog dev: --dev-docs documents and --dev-offers offers into its tables, documents ?wait=true at 5 000/s, restart to ready", Run: runDev},
}

// Config of a run.
type Config struct {
	// Client are the settings of offerlog's clients in the run
	// (--compression, --max-record-bytes).
	Client streams.ClientSettings
	Docs   int
	// Keys is the numerator scenario's number of keys.
	Keys int
	// Offers is the offers scenario's number of offers; SizeOffers the
	// size scenario's.
	Offers, SizeOffers int
	// Burst is the burst scenario's number of timers due at once.
	Burst int
	// DevDocs and DevOffers are the dev scenario's tables.
	DevDocs, DevOffers int
	// WaitRate and WaitFor are the dev scenario's ?wait=true load (0:
	// DefaultWaitRate for DefaultWaitFor).
	WaitRate int
	WaitFor  time.Duration
	// Memory is the process's memory budget, as offerlog dev's --memory:
	// each scenario runs with the Go runtime's soft limit its components'
	// process would have (platform.GoMemory), unless GOMEMLIMIT is set;
	// the dev scenario's memory is compared to it.
	Memory     int64
	Partitions int32
	// Only runs these scenarios (and the ceilings); empty runs all.
	Only []string
	// Runs is how many times the whole run is repeated, each on a broker
	// and state of its own; with more than one, the report of the median
	// run of each row follows (0 or 1: once).
	Runs int
	// ProfileDir, if set, receives a CPU profile of each scenario
	// (SCENARIO.cpu.pprof) and the allocations up to its end
	// (SCENARIO.allocs.pprof: compare two with go tool pprof -diff_base).
	ProfileDir string
	// GokaCeiling is the goka-ceiling binary (the bench module's cmd/goka-ceiling) the goka
	// ceiling runs in; "" looks beside this binary, then on the PATH, then
	// builds it with the go command (a checkout of offerlog).
	GokaCeiling string
	Out         io.Writer
	Logger      *slog.Logger
}

// Run runs the benchmarks and prints the report to cfg.Out: each run's,
// then, with cfg.Runs above one, the medians'.
func Run(ctx context.Context, cfg Config) error {
	for _, name := range cfg.Only {
		if !slices.ContainsFunc(Scenarios, func(s Scenario) bool { return s.Name == name }) {
			return fmt.Errorf("bench: unknown scenario %q", name)
		}
	}
	runs := max(cfg.Runs, 1)
	var all []map[string]Result
	var order []string
	for i := range runs {
		if runs > 1 {
			fmt.Fprintf(cfg.Out, "run %d of %d\n", i+1, runs)
		}
		results, o, err := runOnce(ctx, cfg)
		if err != nil {
			return err
		}
		all, order = append(all, results), o
	}
	if runs > 1 {
		med := medians(all, order)
		fmt.Fprintf(cfg.Out, "\nthe median of %d runs, row by row (a row with latencies: the run of the median p99; "+
			"the others: of the median rate):\n", runs)
		report(cfg.Out, order, med)
		if !explicitOnly(cfg.Only) {
			fmt.Fprintln(cfg.Out)
			reportTargets(cfg.Out, med, rss("VmHWM"), cfg.Memory)
		}
	}
	return nil
}

// explicitOnly tells whether only names every scenario to run and every
// one named runs only when named (the size scenario): such a run skips the
// ceilings and the documents they read.
func explicitOnly(only []string) bool {
	if len(only) == 0 {
		return false
	}
	for _, name := range only {
		if i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name }); i < 0 || !Scenarios[i].Explicit {
			return false
		}
	}
	return true
}

// medians returns, for each row of order, the result of the median run:
// by p99 where the row has latencies, else by rate; its note lists every
// run's figure.
func medians(all []map[string]Result, order []string) map[string]Result {
	out := map[string]Result{}
	for _, name := range order {
		var rs []Result
		for _, r := range all {
			if v, ok := r[name]; ok {
				rs = append(rs, v)
			}
		}
		if len(rs) == 0 {
			continue
		}
		byLatency := len(rs[0].Latencies) > 0
		key := func(r Result) float64 {
			if byLatency {
				return float64(r.Percentile(99))
			}
			return r.Rate()
		}
		var figures []string
		for _, r := range rs {
			if byLatency {
				figures = append(figures, fmt.Sprintf("%s/s p99 %s", thousands(r.Rate()), ms(r.Percentile(99))))
			} else {
				figures = append(figures, fmt.Sprintf("%s/s in %.2f s", thousands(r.Rate()), r.Duration.Seconds()))
			}
		}
		slices.SortStableFunc(rs, func(a, b Result) int { return cmp.Compare(key(a), key(b)) })
		m := rs[len(rs)/2]
		m.Note = fmt.Sprintf("runs: %s; %s", strings.Join(figures, ", "), m.Note)
		out[name] = m
	}
	return out
}

// runOnce is one run of the scenarios, on a broker of its own: it prints
// its report and returns its results with their rows' order.
func runOnce(ctx context.Context, cfg Config) (map[string]Result, []string, error) {
	dir, err := os.MkdirTemp("", "offerlog-bench-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	// The broker keeps its log in segment files, as offerlog dev's does
	// (without a data directory kfake holds every record in memory), in a
	// process of its own (startBroker).
	addrs, stopBroker, err := startBroker(ctx, filepath.Join(dir, "broker"), cfg.Client.MaxRecordBytes)
	if err != nil {
		return nil, nil, err
	}
	defer stopBroker()
	kafka, err := streams.NewCluster(addrs, nil, cfg.Client)
	if err != nil {
		return nil, nil, err
	}
	defer kafka.Close()
	env := &Env{Brokers: addrs, Cluster: kafka, Partitions: cfg.Partitions, Docs: cfg.Docs, Keys: cfg.Keys, Offers: cfg.Offers,
		Burst: cfg.Burst, SizeOffers: cfg.SizeOffers, BrokerDir: filepath.Join(dir, "broker", "broker"),
		DevDocs: cfg.DevDocs, DevOffers: cfg.DevOffers, WaitRate: cfg.WaitRate, WaitFor: cfg.WaitFor, Source: "bench.source",
		GokaCeiling: cfg.GokaCeiling, binDir: dir, Logger: cfg.Logger, Admin: kafka.Admin()}
	if _, err := topics.Ensure(ctx, env.Admin, -1, append(topics.Catalogue(cfg.Partitions),
		topics.Topic{Name: env.Source, Partitions: cfg.Partitions, Retention: topics.Forever})); err != nil {
		return nil, nil, err
	}
	// Explicit scenarios run only when named; named alone, they run
	// without the ceilings and the documents those read.
	explicitOnly := explicitOnly(cfg.Only)
	if explicitOnly {
		fmt.Fprintf(cfg.Out, "offerlog-bench %s: %d partitions, embedded broker in a process of its own\n", strings.Join(cfg.Only, " "), cfg.Partitions)
	} else {
		fmt.Fprintf(cfg.Out, "offerlog-bench: %d documents (%d bytes each), %d partitions, embedded broker in a process of its own\n",
			cfg.Docs, docSize(), cfg.Partitions)
	}
	fmt.Fprintf(cfg.Out, "machine: %s/%s, %d CPUs, %s; %s; %s\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(),
		time.Now().UTC().Format("2006-01-02"), buildForm())
	if !explicitOnly {
		start := time.Now()
		if err := writeDocs(ctx, env.Brokers, env.Source, cfg.Docs, 0); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(cfg.Out, "prepared the source topic in %s (%.0f docs/s produced, acks=all)\n\n",
			time.Since(start).Round(time.Millisecond), float64(cfg.Docs)/time.Since(start).Seconds())
	}

	results := map[string]Result{}
	var order, left []string
	for _, s := range Scenarios {
		named := slices.Contains(cfg.Only, s.Name)
		if (s.Explicit && !named) || (len(cfg.Only) > 0 && !named && (!s.Ceiling || explicitOnly)) {
			continue
		}
		env.StateDir = filepath.Join(dir, s.Name)
		if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cfg.Memory > 0 {
			pc := platform.Config{Memory: cfg.Memory}
			if s.NoStores {
				pc.Components = []string{platform.ComponentCache}
			}
			debug.SetMemoryLimit(platform.GoMemory(pc))
		}
		fmt.Fprintf(cfg.Out, "running %s: %s\n", s.Name, s.Doc)
		stop, err := profile(cfg.ProfileDir, s.Name)
		if err != nil {
			return nil, nil, err
		}
		r, err := s.Run(ctx, env)
		if perr := stop(); err == nil {
			err = perr
		}
		if err != nil {
			return nil, nil, fmt.Errorf("bench %s: %w", s.Name, err)
		}
		if r.RSS == 0 {
			r.RSS = rss("VmRSS")
		}
		// What the scenario left behind on the Go heap, once collected:
		// the scenarios share this process.
		left = append(left, fmt.Sprintf("%s %d", s.Name, heapInUse()>>20))
		results[s.Name] = r
		order = append(order, s.Name)
		for _, more := range r.Also {
			results[s.Name+"/"+more.Name] = more
			order = append(order, s.Name+"/"+more.Name)
		}
	}
	fmt.Fprintln(cfg.Out)
	report(cfg.Out, order, results)
	peak := rss("VmHWM")
	fmt.Fprintf(cfg.Out, "memory: rss is the process's resident MiB after each scenario; its peak was %d MiB; "+
		"the Go heap in use after each, collected (MiB): %s\n", peak>>20, strings.Join(left, ", "))
	if !explicitOnly {
		fmt.Fprintln(cfg.Out)
		reportTargets(cfg.Out, results, peak, cfg.Memory)
	}
	return results, order, nil
}

// rss returns a /proc/self/status memory figure (VmRSS, VmHWM) in bytes,
// or 0 where there is none.
func rss(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb << 10
		}
	}
	return 0
}

func report(w io.Writer, order []string, results map[string]Result) {
	var ceilings []string
	for _, s := range Scenarios {
		if s.Ceiling {
			if _, ok := results[s.Name]; ok {
				ceilings = append(ceilings, s.Name)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	header := []string{"scenario", "records", "seconds", "records/s", "p50", "p99", "rss"}
	for _, c := range ceilings {
		header = append(header, "vs "+c)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, name := range order {
		r := results[name]
		row := []string{name, fmt.Sprint(r.Records), fmt.Sprintf("%.2f", r.Duration.Seconds()), fmt.Sprintf("%.0f", r.Rate()),
			latency(r, 50), latency(r, 99), mib(r.RSS)}
		for _, c := range ceilings {
			row = append(row, fmt.Sprintf("%.2f", r.Rate()/results[c].Rate()))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	for _, name := range order {
		if n := results[name].Note; n != "" {
			fmt.Fprintf(w, "%s: %s\n", name, n)
		}
	}
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprint(b >> 20)
}

func latency(r Result, p float64) string {
	if len(r.Latencies) == 0 {
		return "-"
	}
	return r.Percentile(p).Round(100 * time.Microsecond).String()
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// buildForm says where this binary's local stores keep their memory,
// which decides the Go runtime's soft limit (platform.GoMemory).
func buildForm() string {
	if table.StoresOnGoHeap {
		return "built without cgo, as shipped: the local stores' memory is Go heap"
	}
	return "built with cgo: the local stores' memory is C's, outside the Go heap (the image and make build are without cgo)"
}

// Client is the bench's benchmark client id prefix.
const client = "bench"

// doc returns document i of a run: key i%keys, so keys get several versions.
func doc(i int, at time.Time) *schemas.RawDocument {
	title := fmt.Sprintf("offer %d: a second-hand bicycle in good condition, pick-up only", i)
	price := int64(1000 + i%5000)
	return &schemas.RawDocument{
		PK: fmt.Sprint(i % keysOf(i)), Version: int64(i), Epoch: 1, Action: schemas.ActionUpsert, Timestamp: at,
		Fields: []schemas.Field{
			{Name: "price", Int64: &price},
			{Name: "tags", StringList: []string{"bike", "sport", "used"}},
			{Name: "title", String: &title},
		},
		Embeddings: []schemas.Embedding{{Name: "vec", Vector: make([]float32, 32)}},
	}
}

// keysOf spreads documents over many keys with a few versions each.
func keysOf(int) int { return 50_000 }

func docSize() int {
	data, _ := schemas.RawDocuments.Encode(doc(123456, time.Now()))
	return len(data)
}

// epochSchema is the schema the bench documents are written in.
func epochSchema() *schemas.EpochSchema {
	return &schemas.EpochSchema{Client: client, Epoch: 1, RegisteredAt: time.Unix(1, 0).UTC(),
		Fields: []schemas.FieldSpec{
			{Name: "title", Type: schemas.TypeString, Required: true},
			{Name: "price", Type: schemas.TypeInt64},
			{Name: "tags", Type: schemas.TypeStringList},
		},
		Embeddings: []schemas.EmbeddingSpec{{Name: "vec", Dimension: 32}},
	}
}

// writeDocs produces n documents to topic, starting at document first.
func writeDocs(ctx context.Context, brokers []string, topic string, n, first int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	var errs []error
	errc := make(chan error, 1)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := first; i < first+n; i++ {
		d := doc(i, now)
		data, err := schemas.RawDocuments.Encode(d)
		if err != nil {
			return err
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(client + "/" + d.PK), Value: data}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		errs = append(errs, err)
	}
	select {
	case err := <-errc:
		errs = append(errs, err)
	default:
	}
	return errors.Join(errs...)
}

// profile starts the CPU profile of scenario name in dir ("" for none); the
// returned func stops it and writes the allocation profile.
func profile(dir, name string) (func() error, error) {
	if dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cpu, err := os.Create(filepath.Join(dir, name+".cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, fmt.Errorf("bench: CPU profile (is another running? -cpuprofile and -profiles exclude each other): %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		err := cpu.Close()
		allocs, cerr := os.Create(filepath.Join(dir, name+".allocs.pprof"))
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		defer allocs.Close()
		return errors.Join(err, pprof.Lookup("allocs").WriteTo(allocs, 0))
	}, nil
}
