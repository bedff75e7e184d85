package scheduling_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// orderStage processes every offer, noting in order which offers it began
// with: fresh ones (title "fresh ...") and the others (a re-crawl's).
type orderStage struct {
	mu     sync.Mutex
	starts []string // offer ids, in the order Process began with them
	fresh  map[string]int
}

func (s *orderStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, st schemas.StageState) (scheduler.Should, error) {
	return scheduler.Should{Process: st.Version == 0}, nil
}

func (s *orderStage) Process(_ context.Context, o *schemas.Offer, _ int64, _ schemas.StageState) (scheduler.Result, error) {
	s.mu.Lock()
	if strings.HasPrefix(o.Title, "fresh") {
		s.fresh[o.ID] = len(s.starts)
	}
	s.starts = append(s.starts, o.ID)
	s.mu.Unlock()
	return scheduler.Result{State: &schemas.StageState{TypeURL: "seen"}}, nil
}

// started returns how many calls began, and the index of the call of each
// fresh offer seen so far.
func (s *orderStage) started() (int, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.fresh))
	for id, i := range s.fresh {
		out[id] = i
	}
	return len(s.starts), out
}

// seedOffers writes n active offers straight into the aggregate's table
// topic, as a restore would, before the aggregate starts.
func seedOffers(t *testing.T, brokers []string, n int) {
	t.Helper()
	cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	ctx := testkit.Context(t, 5*time.Minute)
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	price := int64(100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		id := offers.IDFrom(rand.Uint64())
		rec := &schemas.OfferRecord{Version: 1, Offer: schemas.Offer{ID: id, SellerID: "s", Category: "cars", Title: fmt.Sprint("old ", i),
			Price: &price, Currency: "RUB", Status: schemas.OfferActive, CreatedAt: at, UpdatedAt: at}}
		v, err := schemas.OfferRecords.Encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: string(topics.OffersTable), Key: []byte(id), Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// TestRecrawlKeepsFreshChangesFirst: while a re-crawl of 100 000 offers
// goes through a stage, fresh changes still go first. Counted in the
// stage's own calls, not in time: between a fresh offer's creation and
// its Process call, at most a few thousand re-crawl calls began (the
// re-crawl's lead over the aggregate and the stage, recrawlAhead, plus
// the slots), never the re-crawl's bulk. Without priorities, or with a
// re-crawl that floods the aggregate's commands, fresh offers wait behind
// tens of thousands of re-crawl calls.
func TestRecrawlKeepsFreshChangesFirst(t *testing.T) {
	const n = 100_000
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(4))
	seedOffers(t, brokers, n)
	stage := &orderStage{fresh: map[string]int{}}
	sc := scheduler.StageConfig{Name: "stage-c", Address: serve(t, stage), MaxParallelism: 4}
	prod := startStages(t, brokers, sc)

	// How many calls began by each fresh offer's creation, and after; and
	// how many commands the aggregate had yet to do when it was created.
	adm := testkit.Admin(t, brokers)
	latency := func(title string, count int) (between []int, ahead []int64) {
		before := map[string]int{}
		for i := range count {
			began, _ := stage.started()
			backlog, err := streams.Backlog(testkit.Context(t, 30*time.Second), adm, string(offers.Group), topics.OffersCommands)
			if err != nil {
				t.Fatal(err)
			}
			ahead = append(ahead, backlog)
			before[create(t, prod, "s", fmt.Sprint(title, " ", i), time.Now())] = began
			time.Sleep(20 * time.Millisecond) // a steady trickle of fresh changes, not a burst
		}
		testkit.Eventually(t, 2*time.Minute, "every fresh offer processed", func() bool {
			_, fresh := stage.started()
			between = between[:0]
			for id, began := range before {
				at, ok := fresh[id]
				if !ok {
					return false
				}
				between = append(between, at-began)
			}
			return true
		})
		slices.Sort(between)
		slices.Sort(ahead)
		return between, ahead
	}
	idle, _ := latency("fresh alone", 50)

	ctx, cancel := context.WithCancel(context.Background())
	recrawled := make(chan error, 1)
	go func() {
		_, err := scheduler.Recrawl(ctx, testkit.Cluster(t, brokers), scheduler.StageConfig{Name: "stage-c", Timeout: time.Second}, recrawlAll{}, testkit.Logger())
		recrawled <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-recrawled; err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	})
	testkit.Eventually(t, 3*time.Minute, "the re-crawl under way", func() bool {
		began, _ := stage.started()
		return began > 2_000
	})
	busy, ahead := latency("fresh during the re-crawl", 100)
	began, _ := stage.started()
	t.Logf("calls begun between a fresh offer's creation and its call: alone p50 %d max %d; during a re-crawl of %d offers p50 %d p99 %d max %d; "+
		"commands ahead of it at the aggregate p50 %d max %d; %d calls in all",
		idle[len(idle)/2], idle[len(idle)-1], n, busy[len(busy)/2], busy[len(busy)*99/100], busy[len(busy)-1],
		ahead[len(ahead)/2], ahead[len(ahead)-1], began)
	if began >= n {
		t.Fatalf("the re-crawl was done (%d calls) before the fresh offers: the test proves nothing", began)
	}
	// The re-crawl keeps at most 2 000 commands ahead (recrawlAhead) and
	// sends 1 000 at a time; the stage's results add a few.
	if worst := ahead[len(ahead)-1]; worst > 4000 {
		t.Fatalf("a fresh offer's command waited behind %d commands at the aggregate", worst)
	}
	if worst := busy[len(busy)-1]; worst > 4000 {
		t.Fatalf("a fresh offer waited behind %d re-crawl calls", worst)
	}
}
