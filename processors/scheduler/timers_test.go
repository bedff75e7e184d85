package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// TestTimersResumeFromTheirStore restarts the timer service on the same
// store: it reads only what came after, and keeps every pending timer.
func TestTimersResumeFromTheirStore(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, time.Minute)
	put := func(from, to int) {
		for i := from; i < to; i++ {
			data, _ := schemas.StageTimers.Encode(&schemas.StageTimer{OfferID: fmt.Sprint("o", i), Stage: "s", DueAt: time.Now().Add(time.Hour).UnixMilli()})
			prod.Produce(ctx, &kgo.Record{Topic: topics.SchedulerTimers, Key: []byte(fmt.Sprint("o", i, "/s")), Value: data}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	run := func() (*Metrics, *int, func()) {
		m := NewMetrics(metrics.New())
		read := new(int)
		tm := &Timers{Cluster: testkit.Cluster(t, brokers), Dir: dir, Prod: prod, Metrics: m, Logger: testkit.Logger()}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- tm.Run(rctx) }()
		return m, read, func() { cancel(); <-done }
	}
	put(0, 100)
	m, _, stop := run()
	testkit.Eventually(t, 30*time.Second, "100 timers", func() bool { return m.Pending.Value() == 100 })
	stop()
	put(100, 110)
	m, _, stop = run()
	defer stop()
	testkit.Eventually(t, 30*time.Second, "110 timers after the restart", func() bool { return m.Pending.Value() == 110 })
	if n := m.TimerRecords.Value(); n != 10 {
		t.Errorf("the restarted service read %d records, want the 10 new ones", n)
	}
}

// TestTimersReplaceAStoreOfAnEarlierRelease: a timer store of an earlier
// release (LevelDB, in the directory itself), even one that claims to have
// read the whole topic, is removed, and the service reads the topic again
// from its start into its Pebble store.
func TestTimersReplaceAStoreOfAnEarlierRelease(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, time.Minute)
	for i := range 50 {
		data, _ := schemas.StageTimers.Encode(&schemas.StageTimer{OfferID: fmt.Sprint("o", i), Stage: "s", DueAt: time.Now().Add(time.Hour).UnixMilli()})
		prod.Produce(ctx, &kgo.Record{Topic: topics.SchedulerTimers, Key: []byte(fmt.Sprint("o", i, "/s")), Value: data}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The files LevelDB keeps in its directory; its log holds the offsets
	// the earlier release had read to (1000 on both partitions).
	for name, content := range map[string]string{
		"CURRENT": "MANIFEST-000002\n", "LOCK": "", "LOG": "", "MANIFEST-000002": "",
		"000001.log": "o/0\x001000\x00o/1\x001000",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := NewMetrics(metrics.New())
	tm := &Timers{Cluster: testkit.Cluster(t, brokers), Dir: dir, Prod: prod, Metrics: m, Logger: testkit.Logger()}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tm.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	testkit.Eventually(t, 30*time.Second, "50 timers read again", func() bool { return m.Pending.Value() == 50 })
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "pebble" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("the store's directory holds %v, want only pebble", names)
	}
}

// TestABurstOfOneStageLeavesRoomForAnother fires from the store alone (no
// broker): a round takes at most fireQuota timers of each stage, so the
// other stage's due timers go out in the first round, and what apply
// writes while a round is in flight (an earlier timer, a replacement) is
// neither skipped nor lost.
func TestABurstOfOneStageLeavesRoomForAnother(t *testing.T) {
	tm, put := timersOnDisk(t)
	burst := fireQuota + 500
	for i := range burst {
		put(fmt.Sprint("o", i), "burst", 1000)
	}
	put("p1", "probe", 1000)
	put("p2", "probe", 1001)
	put("p3", "probe", 5000)
	stagesOf := func(cmds []*schemas.OfferCommand) map[string]int {
		n := map[string]int{}
		for _, c := range cmds {
			n[c.Stage]++
		}
		return n
	}

	cmds, taken, starts, more, err := tm.due(2000)
	if err != nil {
		t.Fatal(err)
	}
	if got := stagesOf(cmds); got["burst"] != fireQuota || got["probe"] != 2 || !more {
		t.Fatalf("first round: %v, more %v; want %d of the burst, the 2 due probes, and more", got, more, fireQuota)
	}
	// While the round is in flight: a burst timer earlier than every one
	// fired, and a taken one moved to later.
	put("early", "burst", 10)
	// A burst timer of the round (the stages are walked in map order, so
	// taken[0] may be a probe).
	i := slices.IndexFunc(taken, func(f firing) bool { return strings.HasSuffix(f.key, "/burst") })
	taken0 := taken[i].key
	put(taken0[:len(taken0)-len("/burst")], "burst", 3000)
	if _, err := tm.forget(taken, starts); err != nil {
		t.Fatal(err)
	}

	cmds, taken, starts, more, err = tm.due(2000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range cmds {
		got[c.OfferID] = true
	}
	if len(cmds) != 501 || !got["early"] || more {
		t.Fatalf("second round: %d timers (early: %v), more %v; want the 500 left and the early one", len(cmds), got["early"], more)
	}
	if _, err := tm.forget(taken, starts); err != nil {
		t.Fatal(err)
	}
	if next := tm.nextDueLocked(); next != 3000 {
		t.Fatalf("next due %d, want the moved timer's 3000", next)
	}
	if v, err := tm.get([]byte("k/" + taken0)); err != nil || string(v) != "3000" {
		t.Fatalf("the moved timer's due time in the store: %q (%v), want 3000", v, err)
	}
	// After a restart on the same store, the same timers are pending.
	if err := tm.db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tm.open(); err != nil {
		t.Fatal(err)
	}
	cmds, _, _, _, err = tm.due(10_000)
	if err != nil {
		t.Fatal(err)
	}
	if got := stagesOf(cmds); got["burst"] != 1 || got["probe"] != 1 {
		t.Fatalf("after a restart, due: %v; want the moved burst timer and the last probe", got)
	}
}

// TestATimerAppliedLateInsideAFiringFires applies, while a firing is in
// flight, a timer already due whose place in the stage's index falls
// between the timers fired: the next round fires it. Before, the firing's
// start moved past the last timer fired and the late one never fired (the
// topology test's due timers, three offers of 258 after a scheduler pod's
// kill -9: the restarted timer service fired while it read its backlog).
func TestATimerAppliedLateInsideAFiringFires(t *testing.T) {
	tm, put := timersOnDisk(t)
	put("a", "s", 1000)
	put("c", "s", 3000)
	for round, restart := range []bool{false, true} {
		if restart {
			// A restarted service starts each stage at its prefix.
			if err := tm.db.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tm.open(); err != nil {
				t.Fatal(err)
			}
			put("a", "s", 1000)
			put("c", "s", 3000)
		}
		cmds, taken, starts, _, err := tm.due(5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) != 2 {
			t.Fatalf("round %d: %d timers due, want a and c", round, len(cmds))
		}
		put("b", "s", 2000) // applied while a and c are being sent
		if _, err := tm.forget(taken, starts); err != nil {
			t.Fatal(err)
		}
		cmds, taken, starts, _, err = tm.due(5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) != 1 || cmds[0].OfferID != "b" {
			t.Fatalf("round %d: the next firing took %d timers, want the late b", round, len(cmds))
		}
		if _, err := tm.forget(taken, starts); err != nil {
			t.Fatal(err)
		}
		if next := tm.nextDueLocked(); next != 0 {
			t.Fatalf("round %d: next due %d, want none", round, next)
		}
	}
}

// timersOnDisk opens a timer service's store alone (no broker), closed
// when the test ends, and returns it with put, which applies a timer
// record of the offer's stage, due at due (Unix ms), at the next offset.
func timersOnDisk(t *testing.T) (*Timers, func(id, stage string, due int64)) {
	t.Helper()
	tm := &Timers{Dir: t.TempDir(), Metrics: NewMetrics(metrics.New()), Logger: testkit.Logger()}
	if err := tm.open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tm.db.Close() })
	offset := int64(0)
	put := func(id, stage string, due int64) {
		t.Helper()
		data, _ := schemas.StageTimers.Encode(&schemas.StageTimer{OfferID: id, Stage: stage, DueAt: due})
		if err := tm.apply([]*kgo.Record{{Key: []byte(id + "/" + stage), Value: data, Offset: offset}}); err != nil {
			t.Fatal(err)
		}
		offset++
	}
	return tm, put
}
