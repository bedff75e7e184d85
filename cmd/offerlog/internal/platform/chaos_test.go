package platform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/stagev1"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// The chaos test runs every stateful component of the platform in a child
// process, drives it with the load of its users through the HTTP API and
// the ingest topics, kills the process (SIGKILL) at random moments, starts
// it again on the same local state and goes on; at the end it checks every
// answer a client was given against the tables, the tables against a
// recount and against a replay of their logs, and the numerator's ids
// against a run that was never interrupted.
//
// OFFERLOG_CHAOS_KILLS sets the number of kills (3 by default; `make
// test-chaos` asks for 20), OFFERLOG_CHAOS_SEED repeats a run's moments.

const chaosEnv = "OFFERLOG_CHAOS_CHILD"

// chaosComponents are the stateful components and the API that answers
// their clients: everything but the cache and the sinks.
var chaosComponents = []string{platform.ComponentRegistry, platform.ComponentIndexer, platform.ComponentNumerator,
	platform.ComponentOffers, platform.ComponentDrafts, platform.ComponentCabinet, platform.ComponentFeeds,
	platform.ComponentScheduler, platform.ComponentAPI}

// chaosStageName is the external stage the scheduler calls; the test serves
// it, so it outlives every kill.
const chaosStageName = "stage-a"

// chaosChild is what the killed process is told to run.
type chaosChild struct {
	Brokers []string
	// KafkaAddr, without Brokers, runs the embedded broker in the process
	// (offerlog dev's form): it is killed with the rest.
	KafkaAddr string
	DataDir   string
	HTTPAddr  string
	ZooKeeper string
	Stage     string
}

func (c chaosChild) config() platform.Config {
	cfg := platformtest.Config(c.DataDir)
	cfg.Brokers, cfg.HTTPAddr, cfg.GRPCAddr = c.Brokers, c.HTTPAddr, ""
	if len(c.Brokers) == 0 {
		cfg.KafkaAddr, cfg.Partitions, cfg.Memory = c.KafkaAddr, 8, 1<<30
		cfg.Components, cfg.Cache.Addr = nil, "127.0.0.1:0"
	}
	cfg.Components = chaosComponents
	cfg.EpochGrace = time.Second
	cfg.ZooKeeper, cfg.ZooKeeperSession = c.ZooKeeper, 2*time.Second
	cfg.Stages = chaosStages(c.Stage)
	cfg.Numerator.RetryEvery = 100 * time.Millisecond
	// OFFERLOG_CHAOS_PPROF serves the platform's profiles there, to see
	// what a soak's process holds while it runs.
	cfg.PprofAddr = os.Getenv("OFFERLOG_CHAOS_PPROF")
	return cfg
}

func chaosStages(addr string) scheduler.Config {
	return scheduler.Config{Stages: []scheduler.StageConfig{{Name: chaosStageName, Address: addr, MaxParallelism: 4}}}
}

// TestChaosPlatformProcess is not a test of its own: the chaos test runs
// the test binary with it selected, to have a platform it can kill.
func TestChaosPlatformProcess(t *testing.T) {
	raw := os.Getenv(chaosEnv)
	if raw == "" {
		t.Skip("runs only as the process TestKill9AnywhereUnderLoad kills")
	}
	var c chaosChild
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	// Warnings of every run go to one file the test shows if it fails.
	f, err := os.OpenFile(filepath.Join(c.DataDir, "platform.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.config()
	cfg.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Logger.Warn("chaos: platform process started", "pid", os.Getpid())
	err = platform.Run(context.Background(), cfg)
	t.Fatalf("the platform returned before it was killed: %v", err)
}

// chaosPlatform is the platform process under test, killed and restarted.
type chaosPlatform struct {
	t     *testing.T
	child chaosChild
	proc  *os.Process
	kill  func()
	// Figures of the run.
	kills, starting int
}

// insidePlatform starts `offerlog dev`'s form of the platform: the
// broker inside the process that is killed. It returns the platform,
// ready, and the broker's address.
func insidePlatform(t *testing.T) (*chaosPlatform, []string) {
	t.Helper()
	kafka := freeAddr(t)
	p := &chaosPlatform{t: t, child: chaosChild{KafkaAddr: kafka, DataDir: t.TempDir(), HTTPAddr: freeAddr(t),
		Stage: serveStage(t, chaosStage{})}}
	p.start()
	t.Cleanup(p.showLog)
	p.waitReady()
	return p, []string{kafka}
}

// runLoads runs each load until the returned stop is called (or the test
// ends), and stop waits for them.
func runLoads(t *testing.T, loads ...func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, load := range loads {
		wg.Go(func() { load(ctx) })
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// showLog shows the end of the platform's log if the test failed.
func (p *chaosPlatform) showLog() {
	if !p.t.Failed() {
		return
	}
	b, _ := os.ReadFile(filepath.Join(p.child.DataDir, "platform.log"))
	if len(b) > 20000 {
		b = b[len(b)-20000:]
	}
	p.t.Logf("the platform's log ends:\n%s", b)
}

func (p *chaosPlatform) start() {
	raw, err := json.Marshal(p.child)
	if err != nil {
		p.t.Fatal(err)
	}
	p.proc, p.kill = testkit.ChildProcess(p.t, "TestChaosPlatformProcess", chaosEnv+"="+string(raw))
}

func (p *chaosPlatform) url(path string) string { return "http://" + p.child.HTTPAddr + path }

func (p *chaosPlatform) ready() bool {
	s, _, err := request(context.Background(), "GET", p.url("/readyz"), "")
	return err == nil && s == http.StatusOK
}

func (p *chaosPlatform) waitReady() {
	p.t.Helper()
	testkit.Eventually(p.t, 3*time.Minute, "the platform ready", p.ready)
}

// killAtRandom kills the process at a random moment and starts it again: a
// third of the kills land while it starts (recovering its state), the
// others once it is ready, under load.
func (p *chaosPlatform) killAtRandom(rng *rand.Rand) {
	p.t.Helper()
	if rng.IntN(3) == 0 {
		time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Second))))
		if !p.ready() {
			p.starting++
		}
	} else {
		p.waitReady()
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(3*time.Second))))
	}
	p.kill()
	p.kills++
	p.start()
}

// request sends a request and returns the status and body; err is a failure
// to get an answer, which a client of a killed platform must expect.
func request(ctx context.Context, method, url, body string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// retry waits before the next attempt of a load, unless ctx is done.
func retry(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

// violations collects what a load saw that must not happen; the test fails
// with them at its end (loads run on goroutines of their own).
type violations struct {
	mu   sync.Mutex
	list []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.list) < 50 {
		v.list = append(v.list, fmt.Sprintf(format, args...))
	}
}

func (v *violations) check(t *testing.T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.list {
		t.Error(s)
	}
}

// chaosStage marks every offer with attribute a=done.
type chaosStage struct{}

func (chaosStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: o.Attributes.Get("a") != "done"}, nil
}

func (chaosStage) Process(_ context.Context, o *schemas.Offer, _ int64, st schemas.StageState) (scheduler.Result, error) {
	next := *o
	m := o.Attributes.Map()
	m["a"] = "done"
	next.Attributes = schemas.AttributesOf(m)
	return scheduler.Result{Offer: &next, State: &schemas.StageState{TypeURL: "count", Value: append(st.Value, 'x')}}, nil
}

func serveStage(t *testing.T, stage scheduler.Stage) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	stagev1.RegisterStageServer(g, scheduler.Serve(stage))
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	t.Cleanup(func() { g.Stop(); <-done })
	return ln.Addr().String()
}

// freeAddr returns an address with a free port, for a server that must
// come back at the same address after every kill.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func chaosInt(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// settle waits until every group of the platform has committed all of its
// input.
func settleAll(t *testing.T, brokers []string) {
	t.Helper()
	ctx := testkit.Context(t, 3*time.Minute)
	adm := testkit.Admin(t, brokers)
	for _, g := range []struct {
		group  string
		inputs []string
	}{
		{"registry", []string{topics.DocumentsIngest}},
		{"indexer", []string{topics.DocumentsChanges}},
		{"numerator", []string{topics.NumeratorOffers, topics.NumeratorResults}},
		{"feeds", []string{topics.FeedsIngest}},
		{"offers", []string{topics.OffersCommands}},
		{"drafts", []string{topics.DraftsCommands}},
		{"cabinet", []string{topics.CabinetChanges}},
	} {
		ends, err := adm.ListEndOffsets(ctx, g.inputs...)
		if err != nil {
			t.Fatal(err)
		}
		if err := streams.WaitCommitted(ctx, adm, g.group, ends.Offsets()); err != nil {
			committed, _ := adm.FetchOffsets(context.Background(), g.group)
			groups, _ := adm.DescribeGroups(context.Background(), g.group)
			t.Fatalf("%s did not commit its input (%v): ends %v, committed %v, group %+v", g.group, err, ends.Offsets(), committed.Offsets(), groups[g.group])
		}
	}
}

// sameTable compares two snapshots of a table byte for byte and returns
// the number of records compared.
func sameTable(t *testing.T, what, table string, a, b map[string][]byte) int {
	t.Helper()
	if len(a) != len(b) {
		t.Errorf("%s: %s has %d keys, was %d", what, table, len(b), len(a))
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			_, x, _ := schemas.DecodeJSON(v)
			_, y, _ := schemas.DecodeJSON(b[k])
			t.Errorf("%s: %s[%s] differs:\n%v\n%v", what, table, k, x, y)
		}
	}
	return len(a)
}
