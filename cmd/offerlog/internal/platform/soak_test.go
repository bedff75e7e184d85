package platform_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/topics"
)

// TestSoak runs `offerlog dev`'s form of the platform (the broker inside
// the process) for OFFERLOG_SOAK_DURATION under a steady load (12 writers
// of offers, a client of documents) with a fault every minute, chosen by
// OFFERLOG_SOAK_SEED: a kill -9 and a restart, or a pause (SIGSTOP) of 5
// to 20 s. It fails on any lost acknowledgement, on a read, a view or a
// table that is not its log at the end, on a group that does not commit
// all of its input once the load stops, and on a process whose memory
// grows without bound (its RSS sampled every 5 s, each minute's highest
// compared across the run and with its --memory). `make test-soak DURATION=1h` runs it; make
// test does not. OFFERLOG_CHAOS_PPROF=127.0.0.1:6061 serves the platform
// process's profiles there, to see what it holds while it runs.
func TestSoak(t *testing.T) {
	raw := os.Getenv("OFFERLOG_SOAK_DURATION")
	if raw == "" {
		t.Skip("make test-soak DURATION=1h runs it")
	}
	duration, err := time.ParseDuration(raw)
	if err != nil {
		t.Fatalf("OFFERLOG_SOAK_DURATION=%q: %v", raw, err)
	}
	seed := chaosInt(t, "OFFERLOG_SOAK_SEED", uint64(time.Now().UnixNano()))
	t.Logf("OFFERLOG_SOAK_SEED=%d OFFERLOG_SOAK_DURATION=%v", seed, duration)
	rng := rand.New(rand.NewPCG(seed, 1))
	p, brokers := insidePlatform(t)
	v := &violations{}
	w := newWriters(p, v)
	docs := &docLoad{p: p, v: v, acked: map[string]int64{}}
	stop := runLoads(t, append(w.loads(12, seed), func(ctx context.Context) { docs.run(ctx, rand.New(rand.NewPCG(seed, 2))) })...)

	rss := &rssSampler{}
	kills, pauses := 0, 0
	for end := time.Now().Add(duration); time.Now().Before(end); {
		minute := time.Now().Add(time.Minute)
		at := time.Now().Add(time.Duration(rng.Int64N(int64(50 * time.Second))))
		rss.sampleUntil(p.proc, at)
		if rng.IntN(2) == 0 {
			p.kill()
			kills++
			p.start()
		} else {
			pause := 5*time.Second + time.Duration(rng.Int64N(int64(15*time.Second)))
			if err := p.proc.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(pause)
			if err := p.proc.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			pauses++
		}
		rss.sampleUntil(p.proc, minute)
		rss.minute()
	}
	p.waitReady()
	w.answeredAgain(t)
	stop()
	v.check(t)
	settleAll(t, brokers)

	c := &chaosCheck{t: t, p: p, brokers: brokers, replayWithin: time.Hour}
	live := map[string]map[string][]byte{}
	for _, tb := range chaosTables {
		live[tb] = testkit.Table(t, brokers, tb)
	}
	c.reads(live[string(topics.OffersTable)])
	c.documents(docs)
	w.check(t, live[string(topics.OffersTable)])
	c.recount(live)
	rss.check(t, p.child.config().Memory)

	// The stores the last process left, and a replay, against the log: the
	// broker, which died with the process, is started again on its data.
	p.kill()
	b, err := broker.Start(broker.Config{DataDir: p.child.DataDir, Addr: brokers[0], Partitions: 8, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	c.viewsAreTheLog()
	c.membersGone()
	c.replay()
	for _, tb := range chaosTables {
		c.records += sameTable(t, "replay", tb, live[tb], testkit.Table(t, brokers, tb))
	}
	if !t.Failed() {
		t.Logf("soak: %v, %d kills, %d pauses, %d offers and %d documents told, %d answers and %d records compared, RSS per minute %s",
			duration, kills, pauses, len(w.told), len(docs.acked), c.answers, c.records, rss)
	}
}

// rssSampler keeps the highest resident set of the platform process of
// each minute of a soak.
type rssSampler struct {
	max     int64   // this minute's
	minutes []int64 // each minute's highest, in KiB
}

// sampleUntil samples proc's RSS every 5 s until the time given.
func (r *rssSampler) sampleUntil(proc *os.Process, until time.Time) {
	for time.Now().Before(until) {
		if kb := rssOf(proc.Pid); kb > r.max {
			r.max = kb
		}
		time.Sleep(min(5*time.Second, time.Until(until)+time.Millisecond))
	}
}

func (r *rssSampler) minute() {
	if r.max > 0 {
		r.minutes = append(r.minutes, r.max)
	}
	r.max = 0
}

// check fails if the last quarter of the minutes' highs is above the
// process's memory budget (budget bytes), more than half again and 256
// MiB above the second quarter's: memory that grows with time past what
// the process was given, not a store filling its share.
func (r *rssSampler) check(t *testing.T, budget int64) {
	t.Helper()
	n := len(r.minutes)
	if n < 8 {
		t.Logf("RSS: %d minutes sampled, too few to tell a growth", n)
		return
	}
	median := func(xs []int64) int64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	early, late := median(r.minutes[n/4:n/2]), median(r.minutes[3*n/4:])
	if late > budget>>10 && late > early*3/2 && late-early > 256<<10 {
		t.Errorf("the platform's RSS grows: the median of each minute's highest was %d MiB in the run's second quarter, %d MiB in its last (%s)", early>>10, late>>10, r)
	}
}

func (r *rssSampler) String() string {
	var b strings.Builder
	for i, kb := range r.minutes {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d", kb>>10)
	}
	return b.String() + " MiB"
}

// rssOf returns a process's resident set in KiB, 0 if it cannot be read.
func rssOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
