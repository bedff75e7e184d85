package scheduling_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/stagev1"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// attrStage adds attribute attr=done to every offer without it, after a
// pause, counting its calls in its state; it records when each Process
// call ran and how many ran at once.
type attrStage struct {
	attr  string
	pause time.Duration

	mu       sync.Mutex
	running  int
	maxConc  int
	starts   []time.Time
	perOffer map[string]int
}

func (s *attrStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: o.Attributes.Get(s.attr) == ""}, nil
}

func (s *attrStage) Process(_ context.Context, o *schemas.Offer, _ int64, st schemas.StageState) (scheduler.Result, error) {
	s.mu.Lock()
	s.running++
	s.maxConc = max(s.maxConc, s.running)
	s.starts = append(s.starts, time.Now())
	s.perOffer[o.ID]++
	s.mu.Unlock()
	time.Sleep(s.pause)
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	return scheduler.Result{Offer: done(o, s.attr), State: &schemas.StageState{TypeURL: "count", Value: append(st.Value, 'x')}}, nil
}

// done returns o with attribute attr set to "done", as the tests' stages
// answer.
func done(o *schemas.Offer, attr string) *schemas.Offer {
	next := *o
	m := o.Attributes.Map()
	m[attr] = "done"
	next.Attributes = schemas.AttributesOf(m)
	return &next
}

// timerStage asks to be woken 2 s after an offer's creation, once.
type timerStage struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func due(o *schemas.Offer) int64 { return o.CreatedAt.Add(2 * time.Second).UnixMilli() }

func (s *timerStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, st schemas.StageState) (scheduler.Should, error) {
	if st.TypeURL == "done" || !strings.HasPrefix(o.Title, "timer") {
		return scheduler.Should{}, nil
	}
	if due(o) <= time.Now().UnixMilli() {
		return scheduler.Should{Process: true}, nil
	}
	return scheduler.Should{TimerAt: due(o)}, nil
}

func (s *timerStage) Process(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	s.mu.Lock()
	s.calls[o.ID] = append(s.calls[o.ID], time.Now())
	s.mu.Unlock()
	return scheduler.Result{State: &schemas.StageState{TypeURL: "done"}, TimerAt: -1}, nil
}

// startStages runs the aggregate and the scheduler with stages on brokers
// until the test ends, and returns a producer for the test's commands.
func startStages(t *testing.T, brokers []string, stages ...scheduler.StageConfig) *kgo.Client {
	t.Helper()
	prod, _ := startStagesWith(t, brokers, nil, stages...)
	return prod
}

// startStagesWith is startStages with more components in the process.
func startStagesWith(t *testing.T, brokers []string, more []string, stages ...scheduler.StageConfig) (*kgo.Client, *platformtest.Running) {
	t.Helper()
	cfg := platformtest.Config(t.TempDir())
	cfg.Brokers = brokers
	cfg.Components = append([]string{platform.ComponentOffers, platform.ComponentScheduler}, more...)
	cfg.Stages = scheduler.Config{Stages: stages}
	r := platformtest.Start(t, cfg)
	return testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks())), r
}

// serve serves stage over gRPC for the test and returns its address.
func serve(t *testing.T, stage scheduler.Stage) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	stagev1.RegisterStageServer(g, scheduler.Serve(stage))
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

func create(t *testing.T, prod *kgo.Client, seller, title string, at time.Time) string {
	t.Helper()
	id := offers.IDFrom(rand.Uint64())
	p := int64(100)
	c := &schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id, SellerID: seller, ExpectedVersion: -1, DraftID: id,
		Offer: &schemas.Offer{Category: "cars", Title: title, Price: &p, Currency: "RUB"}}
	data, err := schemas.OfferCommands.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(testkit.Context(t, 30*time.Second), &kgo.Record{Topic: topics.OffersCommands, Key: []byte(id), Value: data, Timestamp: at}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return id
}

// offer reads an offer's record through the aggregate's changelog (a read
// that crosses the embedded broker's compaction may miss it: read again).
func offer(t *testing.T, brokers []string, id string) *schemas.OfferRecord {
	t.Helper()
	var last *schemas.OfferRecord
	testkit.Eventually(t, 30*time.Second, "offer "+id+" in the table", func() bool {
		for _, r := range testkit.ReadAll(t, brokers, topics.OffersTable) {
			if string(r.Key) == id {
				var rec schemas.OfferRecord
				if err := schemas.OfferRecords.Decode(r.Value, &rec); err != nil {
					t.Fatal(err)
				}
				last = &rec
			}
		}
		return last != nil
	})
	return last
}

func TestStagesEndToEnd(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	a := &attrStage{attr: "a", pause: 30 * time.Millisecond, perOffer: map[string]int{}}
	bb := &attrStage{attr: "b", pause: 30 * time.Millisecond, perOffer: map[string]int{}}
	cfg := platformtest.Config(t.TempDir())
	cfg.Brokers = brokers
	cfg.Components = []string{platform.ComponentOffers, platform.ComponentScheduler, platform.ComponentAPI}
	cfg.Stages = scheduler.Config{Stages: []scheduler.StageConfig{
		{Name: "expiry", Builtin: "expiry", Days: 180},
		{Name: "stage-a", Address: serve(t, a), MaxParallelism: 2, RateLimit: 20},
		{Name: "stage-b", Address: serve(t, bb), Fields: []string{"title", "attributes"}},
	}}
	n := platformtest.Start(t, cfg)
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))

	// Two stages race on the same offers: both results land, none is lost.
	var ids []string
	for i := range 30 {
		ids = append(ids, create(t, prod, "s", fmt.Sprint("offer ", i), time.Now()))
	}
	// An offer created 200 days ago expires.
	old := create(t, prod, "s", "old offer", time.Now().Add(-200*24*time.Hour))
	var seen map[string]*schemas.OfferRecord
	testkit.Eventually(t, 60*time.Second, "both stages' attributes on every offer, the old one expired", func() bool {
		seen = map[string]*schemas.OfferRecord{}
		for _, r := range testkit.ReadAll(t, brokers, topics.OffersTable) {
			var rec schemas.OfferRecord
			if schemas.OfferRecords.Decode(r.Value, &rec) == nil {
				seen[string(r.Key)] = &rec
			}
		}
		for _, id := range ids {
			r := seen[id]
			if r == nil || r.Offer.Attributes.Get("a") != "done" || r.Offer.Attributes.Get("b") != "done" {
				return false
			}
		}
		return seen[old] != nil && seen[old].Offer.Status == schemas.OfferExpired
	})
	for _, id := range ids[:3] {
		r := seen[id]
		if r.Version != 3 { // created, then one result of each stage
			t.Errorf("%s at version %d, want 3", id, r.Version)
		}
		for _, st := range r.Stages {
			if st.Queued {
				t.Errorf("%s still queued for %s", id, st.Stage)
			}
		}
	}
	// Rate limit and parallelism of stage-a, measured.
	a.mu.Lock()
	starts := slices.Clone(a.starts)
	maxConc := a.maxConc
	a.mu.Unlock()
	if maxConc > 2 {
		t.Errorf("stage-a ran %d calls at once, its limit is 2", maxConc)
	}
	slices.SortFunc(starts, func(x, y time.Time) int { return x.Compare(y) })
	if span := starts[len(starts)-1].Sub(starts[0]); len(starts) >= 30 && span < time.Duration(len(starts)-2)*time.Second/20 {
		t.Errorf("stage-a made %d calls in %s, faster than 20/s", len(starts), span)
	}
	// Effects: every saved result is published.
	testkit.Eventually(t, 30*time.Second, "effects of both stages", func() bool {
		count := map[string]int{}
		for _, r := range testkit.ReadAll(t, brokers, topics.SchedulerEffects) {
			var e schemas.StageEffect
			if schemas.StageEffects.Decode(r.Value, &e) == nil {
				count[e.Stage]++
			}
		}
		return count["stage-a"] >= 30 && count["stage-b"] >= 30 && count["expiry"] >= 1
	})

	// The stage state API: read, compare-and-set, a stale version refused.
	conn, err := grpc.NewClient(n.Info.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := stagev1.NewStageStatesClient(conn)
	ctx := testkit.Context(t, time.Minute)
	st, err := sc.Read(ctx, &stagev1.ReadStateRequest{OfferId: ids[0], Stage: "stage-a"})
	if err != nil || st.TypeUrl != "count" || st.Version < 1 {
		t.Fatalf("read: %v %v", st, err)
	}
	up, err := sc.Update(ctx, &stagev1.UpdateStateRequest{OfferId: ids[0], Stage: "stage-a", State: &stagev1.State{TypeUrl: "count", Value: []byte("y"), Version: st.Version}})
	if err != nil || !up.Updated || up.Version != st.Version+1 {
		t.Fatalf("update at the current version: %v %v", up, err)
	}
	up, err = sc.Update(ctx, &stagev1.UpdateStateRequest{OfferId: ids[0], Stage: "stage-a", State: &stagev1.State{Value: []byte("z"), Version: st.Version}})
	if err != nil || up.Updated || up.Version != st.Version+1 {
		t.Fatalf("update at a stale version: %v %v", up, err)
	}

	// Re-crawl queues into the low-priority queue only.
	mainBefore := len(testkit.ReadAll(t, brokers, topics.QueueTopic("stage-b", false)))
	queued, err := scheduler.Recrawl(ctx, testkit.Cluster(t, brokers), scheduler.StageConfig{Name: "stage-b", Timeout: time.Second},
		recrawlAll{}, testkit.Logger())
	if err != nil || queued != len(ids)+1 {
		t.Fatalf("recrawl queued %d (want %d): %v", queued, len(ids)+1, err)
	}
	testkit.Eventually(t, 30*time.Second, "the low-priority queue", func() bool {
		return len(testkit.ReadAll(t, brokers, topics.QueueTopic("stage-b", true))) == len(ids)+1
	})
	if after := len(testkit.ReadAll(t, brokers, topics.QueueTopic("stage-b", false))); after != mainBefore {
		t.Errorf("the re-crawl wrote %d items to the main queue", after-mainBefore)
	}
}

// recrawlAll wants every offer (a re-crawl's ShouldProcess).
type recrawlAll struct{}

func (recrawlAll) ShouldProcess(context.Context, *schemas.Offer, int64, schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: true}, nil
}

func (recrawlAll) Process(context.Context, *schemas.Offer, int64, schemas.StageState) (scheduler.Result, error) {
	return scheduler.Result{}, nil
}

// TestTimerFiresOnceAcrossRestart sets timers 2 s ahead and restarts the
// scheduler (router, workers, timer service) before they are due: each
// fires once, within a second of its time.
func TestTimerFiresOnceAcrossRestart(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	ts := &timerStage{calls: map[string][]time.Time{}}
	stages := scheduler.Config{Stages: []scheduler.StageConfig{{Name: "wake", Address: serve(t, ts)}}}
	base := platformtest.Config(t.TempDir())
	base.Brokers, base.Stages = brokers, stages
	aggregate := base
	aggregate.Components = []string{platform.ComponentOffers}
	agg := platformtest.Start(t, aggregate)
	sched := base
	sched.DataDir, sched.HTTPAddr, sched.Components = t.TempDir(), "", []string{platform.ComponentScheduler}
	first := platformtest.Start(t, sched)
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	var ids []string
	for i := range 5 {
		ids = append(ids, create(t, prod, "s", fmt.Sprint("timer ", i), time.Now()))
	}
	testkit.Eventually(t, 30*time.Second, "the timers set", func() bool {
		return len(testkit.ReadAll(t, brokers, topics.SchedulerTimers)) >= len(ids)
	})
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	second := platformtest.Start(t, sched)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ts.mu.Lock()
		n := len(ts.calls)
		ts.mu.Unlock()
		if n == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d timers fired", n, len(ids))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a second firing would come within this second; none must
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, id := range ids {
		r := offer(t, brokers, id)
		calls := ts.calls[id]
		if len(calls) != 1 {
			t.Errorf("%s processed %d times", id, len(calls))
			continue
		}
		// Never before its time; how late is the machine's load's (the
		// bound of a second failed make test on a loaded machine: no test
		// fails on timing).
		dueAt := r.Offer.CreatedAt.Add(2 * time.Second)
		if late := calls[0].Sub(dueAt); late < 0 {
			t.Errorf("%s fired %s before its time", id, -late)
		}
	}

	// The scheduler's commands are in the aggregate's log: a replay of the
	// aggregate (with its stages) gives the same table, queue flags,
	// states and timers included.
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t, 2*time.Minute)
	adm := testkit.Admin(t, brokers)
	ends, err := adm.ListEndOffsets(ctx, topics.OffersCommands)
	if err != nil {
		t.Fatal(err)
	}
	if err := streams.WaitCommitted(ctx, adm, string(offers.Group), ends.Offsets()); err != nil {
		t.Fatal(err)
	}
	before := testkit.Table(t, brokers, topics.OffersTable)
	if err := agg.Stop(); err != nil {
		t.Fatal(err)
	}
	scfg := table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	if err := offers.Replay(ctx, offers.Config{Streams: scfg, Stages: stages.Names()}, base.Partitions, -1); err != nil {
		t.Fatal(err)
	}
	after := testkit.Table(t, brokers, topics.OffersTable)
	if len(after) != len(before) {
		t.Fatalf("%d offers after the replay, %d before", len(after), len(before))
	}
	for k, v := range before {
		if string(after[k]) != string(v) {
			t.Errorf("offer %s differs after the replay", k)
		}
	}
}

// holdStage marks offers with attribute s=done; the call for an offer
// titled "slow" is held until release is closed.
type holdStage struct {
	release chan struct{}
	held    atomic.Int32
}

func (s *holdStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: o.Attributes.Get("s") != "done"}, nil
}

func (s *holdStage) Process(ctx context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	if o.Title == "slow" {
		s.held.Add(1)
		select {
		case <-s.release:
		case <-ctx.Done():
			return scheduler.Result{}, ctx.Err()
		}
	}
	return scheduler.Result{Offer: done(o, "s")}, nil
}

// TestSlowCallOccupiesOneSlot: while a stage's call for one offer hangs,
// 500 offers created after it pass through that stage (on its other
// slots) and through another stage; the held offer gets its result once
// its call returns. GET /v1/offers/{id}/stages shows it queued in the
// held stage meanwhile, and in none once its result is in.
func TestSlowCallOccupiesOneSlot(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	hold := &holdStage{release: make(chan struct{})}
	other := &attrStage{attr: "a", perOffer: map[string]int{}}
	prod, running := startStagesWith(t, brokers, []string{platform.ComponentAPI},
		scheduler.StageConfig{Name: "stage-s", Address: serve(t, hold), MaxParallelism: 4, Timeout: 5 * time.Minute},
		scheduler.StageConfig{Name: "stage-a", Address: serve(t, other), MaxParallelism: 4})
	slow := create(t, prod, "s", "slow", time.Now())
	testkit.Eventually(t, time.Minute, "the slow offer's call started", func() bool { return hold.held.Load() == 1 })
	stagesOf := func() map[string]bool {
		resp, err := http.Get("http://" + running.Info.HTTPAddr + "/v1/offers/" + slow + "/stages")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st offerapi.OfferStages
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil || st.ID != slow {
			return nil
		}
		queued := map[string]bool{}
		for _, s := range st.Stages {
			queued[s.Stage] = s.Queued
		}
		return queued
	}
	testkit.Eventually(t, time.Minute, "the slow offer queued in stage-s, as its stages say", func() bool {
		q := stagesOf()
		return q["stage-s"] && !q["stage-a"]
	})
	ids := map[string]bool{}
	for i := range 500 {
		ids[create(t, prod, "s", fmt.Sprint("offer ", i), time.Now())] = true
	}
	done := func(both bool) (n int, slowDone bool) {
		for _, v := range testkit.Table(t, brokers, topics.OffersTable) {
			var rec schemas.OfferRecord
			if err := schemas.OfferRecords.Decode(v, &rec); err != nil {
				t.Fatal(err)
			}
			ok := rec.Offer.Attributes.Get("s") == "done" && (!both || rec.Offer.Attributes.Get("a") == "done")
			if ok && ids[rec.Offer.ID] {
				n++
			}
			if rec.Offer.ID == slow {
				slowDone = rec.Offer.Attributes.Get("s") == "done"
			}
		}
		return n, slowDone
	}
	testkit.Eventually(t, 3*time.Minute, "every other offer through both stages while the slow call hangs", func() bool {
		n, _ := done(true)
		return n == len(ids)
	})
	if _, slowDone := done(false); slowDone || hold.held.Load() != 1 {
		t.Fatalf("the slow offer done %v, held %d times, before its call returned", slowDone, hold.held.Load())
	}
	close(hold.release)
	testkit.Eventually(t, time.Minute, "the slow offer's result once its call returned", func() bool {
		_, slowDone := done(false)
		return slowDone
	})
	testkit.Eventually(t, time.Minute, "the slow offer in no queue, as its stages say", func() bool {
		q := stagesOf()
		return q != nil && !q["stage-s"] && !q["stage-a"]
	})
}

// serveAt serves stage at addr until the returned stop is called.
func serveAt(t *testing.T, addr string, stage scheduler.Stage) (stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	stagev1.RegisterStageServer(g, scheduler.Serve(stage))
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { g.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// marked returns how many of ids carry attribute attr=done.
func marked(t *testing.T, brokers []string, attr string, ids []string) int {
	t.Helper()
	n := 0
	table := testkit.Table(t, brokers, topics.OffersTable)
	for _, id := range ids {
		var rec schemas.OfferRecord
		if v, ok := table[id]; ok && schemas.OfferRecords.Decode(v, &rec) == nil && rec.Offer.Attributes.Get(attr) == "done" {
			n++
		}
	}
	return n
}

// TestStageAwayForAMinuteLosesNothing: an external stage that is down for
// 60 s gets, once it is back, every item that waited for it, and nothing
// is dead-lettered.
func TestStageAwayForAMinuteLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a stage down for a minute")
	}
	brokers := testkit.Broker(t, "").Addrs()
	stage := &attrStage{attr: "a", perOffer: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop := serveAt(t, addr, stage)
	prod := startStages(t, brokers, scheduler.StageConfig{Name: "stage-a", Address: addr, MaxParallelism: 4, Timeout: 2 * time.Second})
	first := []string{create(t, prod, "s", "before", time.Now())}
	testkit.Eventually(t, time.Minute, "the stage up", func() bool { return marked(t, brokers, "a", first) == 1 })

	stop()
	var ids []string
	for i := range 50 {
		ids = append(ids, create(t, prod, "s", fmt.Sprint("offer ", i), time.Now()))
	}
	// The outage itself: the items wait for the stage as long as it is
	// away; a minute, as operators see them.
	time.Sleep(time.Minute)
	if n := marked(t, brokers, "a", ids); n != 0 {
		t.Fatalf("%d offers marked while the stage was down", n)
	}
	serveAt(t, addr, stage)
	testkit.Eventually(t, 2*time.Minute, "every offer marked once the stage is back", func() bool { return marked(t, brokers, "a", ids) == len(ids) })
	if dead := testkit.ReadAll(t, brokers, topics.SchedulerDead); len(dead) != 0 {
		t.Fatalf("%d items dead-lettered while the stage was away", len(dead))
	}
}

// failingStage fails every call while broken, then marks attribute f.
type failingStage struct{ broken atomic.Bool }

func (s *failingStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: o.Attributes.Get("f") != "done"}, nil
}

func (s *failingStage) Process(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	if s.broken.Load() {
		return scheduler.Result{}, errors.New("broken")
	}
	return scheduler.Result{Offer: done(o, "f")}, nil
}

// TestRedriveQueuesTheDeadLettersOnce: items of a stage that failed too
// often are dead-lettered with the reason; once it works, a redrive queues
// their offers again and they get their results; a second redrive queues
// nothing.
func TestRedriveQueuesTheDeadLettersOnce(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	stage := &failingStage{}
	stage.broken.Store(true)
	prod := startStages(t, brokers, scheduler.StageConfig{Name: "stage-f", Address: serve(t, stage), MaxFailures: 2})
	var ids []string
	for i := range 10 {
		ids = append(ids, create(t, prod, "s", fmt.Sprint("offer ", i), time.Now()))
	}
	testkit.Eventually(t, time.Minute, "every item dead-lettered", func() bool {
		return len(testkit.ReadAll(t, brokers, topics.SchedulerDead)) == len(ids)
	})
	var d schemas.DeadLetter
	if err := schemas.DeadLetters.Decode(testkit.ReadAll(t, brokers, topics.SchedulerDead)[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Reason, "failed 2 times") || !strings.Contains(d.Reason, "broken") {
		t.Fatalf("dead letter's reason %q", d.Reason)
	}
	// A failed call publishes no effect and leaves the stage's state and
	// version: the offer only leaves the queue.
	testkit.Eventually(t, time.Minute, "every offer out of the queue", func() bool {
		for _, id := range ids {
			if st := stageState(t, brokers, id, "stage-f"); st.Queued {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if st := stageState(t, brokers, id, "stage-f"); st.Version != 0 || st.TypeURL != "" {
			t.Fatalf("offer %s: state %+v after failed calls", id, st)
		}
	}
	if n := len(testkit.ReadAll(t, brokers, topics.SchedulerEffects)); n != 0 {
		t.Fatalf("%d effects of failed calls", n)
	}

	stage.broken.Store(false)
	ctx := testkit.Context(t, time.Minute)
	queued, letters, err := scheduler.Redrive(ctx, testkit.Cluster(t, brokers), "stage-f")
	if err != nil || queued != len(ids) || letters != len(ids) {
		t.Fatalf("redrive: %d queued, %d letters, %v", queued, letters, err)
	}
	testkit.Eventually(t, time.Minute, "every offer marked after the redrive", func() bool { return marked(t, brokers, "f", ids) == len(ids) })
	if queued, letters, err := scheduler.Redrive(ctx, testkit.Cluster(t, brokers), "stage-f"); err != nil || queued != 0 || letters != 0 {
		t.Fatalf("second redrive: %d queued, %d letters, %v", queued, letters, err)
	}
}

// wantStage wants offers only once want is set, and marks attribute r.
type wantStage struct{ want atomic.Bool }

func (s *wantStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: s.want.Load() && o.Attributes.Get("r") != "done"}, nil
}

func (s *wantStage) Process(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	return scheduler.Result{Offer: done(o, "r")}, nil
}

// TestRecrawlEvery: offers a stage did not want when they changed are
// queued by its periodic re-crawl once it wants them.
func TestRecrawlEvery(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	stage := &wantStage{}
	prod := startStages(t, brokers, scheduler.StageConfig{Name: "stage-r", Address: serve(t, stage), RecrawlEvery: time.Second})
	var ids []string
	for i := range 20 {
		ids = append(ids, create(t, prod, "s", fmt.Sprint("offer ", i), time.Now()))
	}
	testkit.Eventually(t, time.Minute, "every offer in the aggregate", func() bool { return len(testkit.Table(t, brokers, topics.OffersTable)) == len(ids) })
	if n := marked(t, brokers, "r", ids); n != 0 {
		t.Fatalf("%d offers processed the stage did not want", n)
	}
	stage.want.Store(true)
	testkit.Eventually(t, time.Minute, "every offer re-crawled and processed", func() bool { return marked(t, brokers, "r", ids) == len(ids) })
}

// stageState returns the stage's part of an offer's record.
func stageState(t *testing.T, brokers []string, id, stage string) schemas.StageState {
	t.Helper()
	st, _ := offers.StageOf(offer(t, brokers, id), stage)
	return st
}

// badStage answers every offer with an offer no validation accepts.
type badStage struct{}

func (badStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: true}, nil
}

func (badStage) Process(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	next := *o
	next.Title = ""
	return scheduler.Result{Offer: &next, State: &schemas.StageState{TypeURL: "x"}}, nil
}

// TestInvalidResultIsDeadLetteredAndReleased: a result the aggregate
// refuses sends the item to scheduler.dead with the reason and takes the
// offer out of the queue, its state unchanged.
func TestInvalidResultIsDeadLetteredAndReleased(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	prod := startStages(t, brokers, scheduler.StageConfig{Name: "stage-x", Address: serve(t, badStage{})})
	id := create(t, prod, "s", "an offer", time.Now())
	testkit.Eventually(t, time.Minute, "the refused result dead-lettered", func() bool {
		return len(testkit.ReadAll(t, brokers, topics.SchedulerDead)) == 1
	})
	var d schemas.DeadLetter
	if err := schemas.DeadLetters.Decode(testkit.ReadAll(t, brokers, topics.SchedulerDead)[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Reason, "result refused") || !strings.Contains(d.Reason, "title") {
		t.Fatalf("dead letter's reason %q", d.Reason)
	}
	testkit.Eventually(t, time.Minute, "the offer out of the queue", func() bool { return !stageState(t, brokers, id, "stage-x").Queued })
	if st := stageState(t, brokers, id, "stage-x"); st.Version != 0 || st.TypeURL != "" {
		t.Fatalf("state %+v after a refused result", st)
	}
	if r := offer(t, brokers, id); r.Offer.Title != "an offer" || r.Version != 1 {
		t.Fatalf("offer after a refused result: version %d, title %q", r.Version, r.Offer.Title)
	}
}

// TestStageAwayLongerThanMaxWait: items that waited max_wait since they
// were queued for a stage that never came up are dead-lettered with the
// reason, and their offers leave the queue.
func TestStageAwayLongerThanMaxWait(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close()
	prod := startStages(t, brokers, scheduler.StageConfig{Name: "stage-n", Address: nowhere, Timeout: 500 * time.Millisecond, MaxWait: 3 * time.Second})
	var ids []string
	for i := range 3 {
		ids = append(ids, create(t, prod, "s", fmt.Sprint("offer ", i), time.Now()))
	}
	testkit.Eventually(t, time.Minute, "every item dead-lettered after max_wait", func() bool {
		return len(testkit.ReadAll(t, brokers, topics.SchedulerDead)) == len(ids)
	})
	for _, r := range testkit.ReadAll(t, brokers, topics.SchedulerDead) {
		var d schemas.DeadLetter
		if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(d.Reason, "away") {
			t.Fatalf("dead letter's reason %q", d.Reason)
		}
	}
	testkit.Eventually(t, time.Minute, "the offers out of the queue", func() bool {
		for _, id := range ids {
			if stageState(t, brokers, id, "stage-n").Queued {
				return false
			}
		}
		return true
	})
}

// TestPushHookDeliversEverySavedResult: a stage with a push_url gets every
// saved result POSTed with its dedup key, again after a failed delivery
// (at least once), and the key names one result of one offer.
func TestPushHookDeliversEverySavedResult(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	var mu sync.Mutex
	tries := map[string]int{}
	var pushes []scheduler.Push
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p scheduler.Push
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || r.Header.Get("Idempotency-Key") != p.DedupKey {
			http.Error(w, "bad push", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if tries[p.DedupKey]++; tries[p.DedupKey] == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		pushes = append(pushes, p)
	}))
	t.Cleanup(hook.Close)
	stage := &attrStage{attr: "a", perOffer: map[string]int{}}
	prod := startStages(t, brokers, scheduler.StageConfig{Name: "stage-a", Address: serve(t, stage), PushURL: hook.URL})
	ids := map[string]bool{}
	for i := range 10 {
		ids[create(t, prod, "s", fmt.Sprint("offer ", i), time.Now())] = true
	}
	testkit.Eventually(t, time.Minute, "every result pushed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		got := map[string]bool{}
		for _, p := range pushes {
			got[p.Offer.ID] = true
		}
		return len(got) == len(ids)
	})
	mu.Lock()
	defer mu.Unlock()
	for _, p := range pushes {
		if !ids[p.Offer.ID] || p.Stage != "stage-a" || p.Offer.Attributes.Get("a") != "done" || p.DedupKey != p.Offer.ID+"/stage-a/1" || !p.Changed {
			t.Fatalf("push %+v", p)
		}
		if r := offer(t, brokers, p.Offer.ID); r.Version < p.OfferVersion {
			t.Fatalf("pushed version %d of %s, the table has %d", p.OfferVersion, p.Offer.ID, r.Version)
		}
		// The stage gets its private state; the public topics do not.
		if p.State.TypeURL != "count" || string(p.State.Value) != "x" || p.State.Version != 1 {
			t.Fatalf("pushed state %+v", p.State)
		}
	}
	for _, r := range testkit.ReadAll(t, brokers, topics.SchedulerEffects) {
		var e schemas.StageEffect
		if err := schemas.StageEffects.Decode(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if e.State.TypeURL != "" || len(e.State.Value) != 0 || e.State.Version != 1 {
			t.Fatalf("scheduler.effects shows the stage's state %+v", e.State)
		}
	}
	for _, r := range testkit.ReadAll(t, brokers, topics.OffersEvents) {
		var ev schemas.OfferEvent
		if err := schemas.OfferEvents.Decode(r.Value, &ev); err != nil {
			t.Fatal(err)
		}
		for _, st := range ev.Stages {
			if st.TypeURL != "" || len(st.Value) != 0 {
				t.Fatalf("offers.events shows the stage's state %+v", st)
			}
		}
	}
}

// slowShould holds ShouldProcess of every offer until release is closed.
type slowShould struct {
	release chan struct{}
	asked   atomic.Int32
}

func (s *slowShould) ShouldProcess(ctx context.Context, _ *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	s.asked.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return scheduler.Should{}, ctx.Err()
	}
	return scheduler.Should{}, nil
}

func (s *slowShould) Process(context.Context, *schemas.Offer, int64, schemas.StageState) (scheduler.Result, error) {
	return scheduler.Result{}, nil
}

// TestSlowShouldProcessDelaysNoOtherStage: while one stage's
// ShouldProcess hangs, another stage decides on and processes every offer.
func TestSlowShouldProcessDelaysNoOtherStage(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	slow := &slowShould{release: make(chan struct{})}
	t.Cleanup(func() { close(slow.release) })
	other := &attrStage{attr: "a", perOffer: map[string]int{}}
	prod := startStages(t, brokers,
		scheduler.StageConfig{Name: "stage-slow", Address: serve(t, slow), Timeout: 10 * time.Minute},
		scheduler.StageConfig{Name: "stage-a", Address: serve(t, other)})
	var ids []string
	for i := range 50 {
		ids = append(ids, create(t, prod, "s", fmt.Sprint("offer ", i), time.Now()))
	}
	testkit.Eventually(t, time.Minute, "the slow stage asked", func() bool { return slow.asked.Load() > 0 })
	testkit.Eventually(t, time.Minute, "every offer through the other stage", func() bool { return marked(t, brokers, "a", ids) == len(ids) })
}

// TestPushTopicCarriesEverySavedResult: a stage with push_topic gets every
// saved result on scheduler.push.STAGE, keyed by the offer, with its state
// in clear and the dedup key in a header; a stage without one gets no
// topic.
func TestPushTopicCarriesEverySavedResult(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	stage := &attrStage{attr: "a", perOffer: map[string]int{}}
	other := &attrStage{attr: "b", perOffer: map[string]int{}}
	prod := startStages(t, brokers,
		scheduler.StageConfig{Name: "stage-a", Address: serve(t, stage), PushTopic: true},
		scheduler.StageConfig{Name: "stage-b", Address: serve(t, other)})
	ids := map[string]bool{}
	for i := range 10 {
		ids[create(t, prod, "s", fmt.Sprint("offer ", i), time.Now())] = true
	}
	push := topics.PushTopic("stage-a")
	testkit.Eventually(t, time.Minute, "every result on the push topic", func() bool {
		got := map[string]bool{}
		for _, r := range testkit.ReadAll(t, brokers, push) {
			got[string(r.Key)] = true
		}
		return len(got) == len(ids)
	})
	for _, r := range testkit.ReadAll(t, brokers, push) {
		var e schemas.StageEffect
		if err := schemas.StageEffects.Decode(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if !ids[string(r.Key)] || e.Offer.ID != string(r.Key) || e.Stage != "stage-a" || e.Offer.Attributes.Get("a") != "done" {
			t.Fatalf("pushed %+v", e)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != scheduler.DedupHeader || string(r.Headers[0].Value) != e.Offer.ID+"/stage-a/1" {
			t.Fatalf("push headers %v", r.Headers)
		}
		if e.State.TypeURL != "count" || string(e.State.Value) != "x" || e.State.Version != 1 {
			t.Fatalf("pushed state %+v", e.State)
		}
	}
	listed, err := testkit.Admin(t, brokers).ListTopics(testkit.Context(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if listed.Has(topics.PushTopic("stage-b")) {
		t.Fatal("a push topic for a stage without a push hook")
	}
}

// heldStage marks offers with its attribute once release is closed,
// counting the calls in flight on one offer across every heldStage that
// shares its counter.
type heldStage struct {
	attr     string
	release  chan struct{}
	inflight *atomic.Int32
	most     *atomic.Int32
	calls    atomic.Int32
}

func (s *heldStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: o.Attributes.Get(s.attr) != "done"}, nil
}

func (s *heldStage) Process(ctx context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	s.calls.Add(1)
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return scheduler.Result{}, ctx.Err()
	}
	return scheduler.Result{Offer: done(o, s.attr)}, nil
}

// TestExclusiveStagesRunOneAtATime: two stages marked exclusive, each
// holding its call, never run on one offer together: while one holds it,
// the other waits (its stages say so), and runs once the first's result
// is in. Without `exclusive` both calls would be in flight at once.
func TestExclusiveStagesRunOneAtATime(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	release := make(chan struct{})
	var inflight, most atomic.Int32
	x := &heldStage{attr: "x", release: release, inflight: &inflight, most: &most}
	y := &heldStage{attr: "y", release: release, inflight: &inflight, most: &most}
	prod, running := startStagesWith(t, brokers, []string{platform.ComponentAPI},
		scheduler.StageConfig{Name: "ex-x", Address: serve(t, x), MaxParallelism: 2, Exclusive: true, Timeout: 5 * time.Minute},
		scheduler.StageConfig{Name: "ex-y", Address: serve(t, y), MaxParallelism: 2, Exclusive: true, Timeout: 5 * time.Minute})
	id := create(t, prod, "s", "exclusive", time.Now())
	testkit.Eventually(t, time.Minute, "one stage's call held", func() bool { return inflight.Load() == 1 })
	testkit.Eventually(t, time.Minute, "the other stage waiting for the offer, as its stages say", func() bool {
		resp, err := http.Get("http://" + running.Info.HTTPAddr + "/v1/offers/" + id + "/stages")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Stages []schemas.StageState `json:"stages"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
			return false
		}
		queued, waiting := 0, 0
		for _, s := range st.Stages {
			if s.Queued {
				queued++
			}
			if s.Waiting {
				waiting++
			}
		}
		return queued == 1 && waiting == 1
	})
	close(release)
	testkit.Eventually(t, time.Minute, "both stages' results in", func() bool {
		r := offer(t, brokers, id)
		return r.Offer.Attributes.Get("x") == "done" && r.Offer.Attributes.Get("y") == "done"
	})
	if most.Load() != 1 || x.calls.Load() == 0 || y.calls.Load() == 0 {
		t.Errorf("%d calls in flight at most on the offer (x called %d times, y %d)", most.Load(), x.calls.Load(), y.calls.Load())
	}
}
