package streams_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/topics"
)

func setup(t *testing.T, partitions int32) []string {
	t.Helper()
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: "in", Partitions: partitions}, {Name: "dead", Partitions: 1}})
	return brokers
}

func produce(t *testing.T, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	cl := testkit.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(testkit.Context(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func deadLetters(t *testing.T, brokers []string) []schemas.DeadLetter {
	t.Helper()
	var out []schemas.DeadLetter
	for _, r := range testkit.ReadAll(t, brokers, "dead") {
		var d schemas.DeadLetter
		if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// run runs a loop until stop is called, which returns Run's error.
func run(t *testing.T, cfg streams.LoopConfig) (stop func() error) {
	t.Helper()
	l, err := streams.NewLoop(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-errc })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestLoopRetriesDeadLettersAndCommits: every record is handled once (a
// transient failure retried), a poison record and one that always fails go
// to the dead-letter topic with their reasons, the group's offsets end at
// the end offsets, and a restarted loop reads nothing again.
func TestLoopRetriesDeadLettersAndCommits(t *testing.T) {
	brokers := setup(t, 4)
	var recs []*kgo.Record
	for i := range 200 {
		v := fmt.Sprintf("v%d", i)
		switch i {
		case 17:
			v = "poison"
		case 42:
			v = "broken"
		}
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 4), Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)})
	}
	produce(t, brokers, recs...)

	var mu sync.Mutex
	handled := map[string]int{}
	failedOnce := map[string]bool{}
	reg := metrics.New()
	cfg := streams.LoopConfig{Cluster: testkit.Cluster(t, brokers), Group: "g", Topics: []string{"in"}, DeadTopic: "dead",
		Backoff: streams.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Attempts: 3},
		Metrics: streams.NewLoopMetrics(reg), Logger: testkit.Logger(),
		Handler: func(_ context.Context, r *kgo.Record) error {
			mu.Lock()
			defer mu.Unlock()
			switch v := string(r.Value); {
			case v == "poison":
				return streams.Permanentf("undecodable: %q", v)
			case v == "broken":
				return errors.New("always broken")
			case !failedOnce[v] && strings.HasSuffix(v, "3"):
				failedOnce[v] = true
				return errors.New("transient")
			}
			handled[string(r.Value)]++
			return nil
		}}
	stop := run(t, cfg)
	testkit.Eventually(t, 30*time.Second, "every record handled or dead", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 198 && len(testkit.ReadAll(t, brokers, "dead")) == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for v, n := range handled {
		if n != 1 {
			t.Errorf("%s handled %d times", v, n)
		}
	}
	dead := deadLetters(t, brokers)
	reasons := map[string]string{}
	for _, d := range dead {
		reasons[string(d.Value)] = d.Reason
		if d.Topic != "in" || d.Group != "g" || d.ValueSize != int64(len(d.Value)) {
			t.Errorf("dead letter %+v", d)
		}
	}
	if !strings.Contains(reasons["poison"], "undecodable") || !strings.Contains(reasons["broken"], "failed 3 times: always broken") {
		t.Errorf("reasons %v", reasons)
	}
	committed, err := testkit.Admin(t, brokers).FetchOffsets(testkit.Context(t, 10*time.Second), "g")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		if o, _ := committed.Lookup("in", p); o.At != 50 {
			t.Errorf("partition %d committed at %d, want 50", p, o.At)
		}
	}
	// A restart reads nothing again.
	before := len(handled)
	stop = run(t, cfg)
	produce(t, brokers, &kgo.Record{Topic: "in", Partition: 1, Key: []byte("late"), Value: []byte("late")})
	testkit.Eventually(t, 30*time.Second, "the late record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled["late"] == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(handled) != before+1 {
		t.Errorf("after restart %d handled, want %d", len(handled), before+1)
	}
	var out bytes.Buffer
	reg.Write(&out)
	for _, want := range []string{`offerlog_loop_records_total{loop="g",outcome="dead"} 2`, `offerlog_loop_retries_total{loop="g"}`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("metrics miss %s:\n%s", want, out.String())
		}
	}
}

// TestLoopSlowPartitionDoesNotStopOthers: while one partition's handler is
// stuck, every record of the other partitions is handled; the stuck
// partition is paused (back-pressure) and goes on once released.
func TestLoopSlowPartitionDoesNotStopOthers(t *testing.T) {
	brokers := setup(t, 3)
	release := make(chan struct{})
	var others, slow atomic.Int64
	stop := run(t, streams.LoopConfig{Cluster: testkit.Cluster(t, brokers), Group: "g", Topics: []string{"in"}, DeadTopic: "dead", MaxPollRecords: 10,
		Logger: testkit.Logger(), Handler: func(ctx context.Context, r *kgo.Record) error {
			if r.Partition != 0 {
				others.Add(1)
				return nil
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			slow.Add(1)
			return nil
		}})
	var recs []*kgo.Record
	for i := range 600 {
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 3), Value: []byte("x")})
	}
	produce(t, brokers, recs...)
	testkit.Eventually(t, 30*time.Second, "the other partitions handled while partition 0 is stuck", func() bool { return others.Load() == 400 })
	if slow.Load() != 0 {
		t.Fatal("the stuck partition moved")
	}
	close(release)
	testkit.Eventually(t, 30*time.Second, "partition 0 handled once released", func() bool { return slow.Load() == 200 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestLoopFatalStopsWithoutCommit: a fatal error ends Run with it, and the
// record is not committed (it is read again after the restart).
func TestLoopFatalStopsWithoutCommit(t *testing.T) {
	brokers := setup(t, 1)
	produce(t, brokers, &kgo.Record{Topic: "in", Value: []byte("a")}, &kgo.Record{Topic: "in", Value: []byte("b")})
	var seen atomic.Int64
	l, err := streams.NewLoop(streams.LoopConfig{Cluster: testkit.Cluster(t, brokers), Group: "g", Topics: []string{"in"}, DeadTopic: "dead",
		Logger: testkit.Logger(), Handler: func(_ context.Context, r *kgo.Record) error {
			seen.Add(1)
			if string(r.Value) == "b" {
				return streams.Fatal(errors.New("store broken"))
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	err = l.Run(testkit.Context(t, 30*time.Second))
	if !streams.IsFatal(err) || !strings.Contains(err.Error(), "store broken") {
		t.Fatalf("Run: %v, want the fatal error", err)
	}
	committed, err := testkit.Admin(t, brokers).FetchOffsets(testkit.Context(t, 10*time.Second), "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := committed.Lookup("in", 0); o.At != 1 {
		t.Fatalf("committed %d, want 1 (only the record handled)", o.At)
	}
	if len(testkit.ReadAll(t, brokers, "dead")) != 0 {
		t.Fatal("a fatal error dead-lettered its record")
	}
}

// TestLoopBatchFindsThePoisonRecord: a batch handler that fails on a batch
// holding a bad record is run again record by record, and only the bad one
// is dead-lettered; records marked Dead by the handler are written once.
func TestLoopBatchFindsThePoisonRecord(t *testing.T) {
	brokers := setup(t, 1)
	var recs []*kgo.Record
	for i := range 50 {
		v := fmt.Sprint(i)
		if i == 20 {
			v = "poison"
		}
		if i == 30 {
			v = "marked"
		}
		recs = append(recs, &kgo.Record{Topic: "in", Value: []byte(v)})
	}
	produce(t, brokers, recs...)
	var mu sync.Mutex
	done := map[string]int{}
	stop := run(t, streams.LoopConfig{Cluster: testkit.Cluster(t, brokers), Group: "g", Topics: []string{"in"}, DeadTopic: "dead",
		Backoff: streams.Backoff{Initial: time.Millisecond, Attempts: 2}, Logger: testkit.Logger(),
		BatchHandler: func(_ context.Context, b *streams.Batch) error {
			for _, r := range b.Records {
				if string(r.Value) == "poison" {
					return errors.New("cannot handle this batch")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range b.Records {
				if string(r.Value) == "marked" {
					b.Dead(r, "marked by the handler")
					continue
				}
				done[string(r.Value)]++
			}
			return nil
		}})
	testkit.Eventually(t, 30*time.Second, "48 handled, 2 dead", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 48 && len(testkit.ReadAll(t, brokers, "dead")) == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range deadLetters(t, brokers) {
		got[string(d.Value)] = d.Reason
	}
	if len(got) != 2 || !strings.Contains(got["poison"], "cannot handle") || got["marked"] != "marked by the handler" {
		t.Fatalf("dead letters %v", got)
	}
}

// TestDeadLetterIsBounded: a 5 MB value becomes a dead letter of its first
// 64 KiB with the size and SHA-256 of the whole, which the broker takes; a
// complete dead letter can be put back as it was, a cut one cannot.
func TestDeadLetterIsBounded(t *testing.T) {
	brokers := setup(t, 1)
	big := bytes.Repeat([]byte("x"), 5<<20)
	r := &kgo.Record{Topic: "in", Partition: 0, Offset: 7, Key: []byte("k"), Value: big,
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
	rec, err := streams.DeadLetterRecord("dead", "g", r, "too big")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Value) > 3*streams.MaxDeadLetterValue {
		t.Fatalf("dead letter of %d bytes", len(rec.Value))
	}
	produce(t, brokers, rec)
	dead := deadLetters(t, brokers)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters", len(dead))
	}
	d := dead[0]
	sum := sha256.Sum256(big)
	if d.ValueSize != 5<<20 || len(d.Value) != streams.MaxDeadLetterValue || !bytes.Equal(d.ValueSHA256, sum[:]) ||
		len(d.Headers) != 1 || d.Complete() {
		t.Fatalf("dead letter: size %d, kept %d, headers %v, complete %v", d.ValueSize, len(d.Value), d.Headers, d.Complete())
	}
	if _, err := streams.RedriveRecord(&d); err == nil {
		t.Fatal("a cut dead letter was put back")
	}
	small := streams.NewDeadLetter("g", "in", 0, 3, []byte("k"), nil, time.Now(), "tombstone")
	back, err := streams.RedriveRecord(small)
	if err != nil || back.Value != nil || back.Topic != "in" || string(back.Key) != "k" {
		t.Fatalf("redrive of a tombstone: %+v, %v", back, err)
	}
}

// TestReadToEndOfTransactionalTopic: a topic ending in a transaction
// marker is read to its end at once, by offsets.
func TestReadToEndOfTransactionalTopic(t *testing.T) {
	brokers := setup(t, 1)
	cl := testkit.Client(t, brokers, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("in"))
	ctx := testkit.Context(t, 30*time.Second)
	for i := range 3 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	start := time.Now()
	if err := streams.ReadToEnd(ctx, testkit.Cluster(t, brokers), "in", func(*kgo.Record) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("read %d records, want 3", n)
	}
	t.Logf("read in %s", time.Since(start))
}

// TestLoopSurvivesBrokerErrors: with the broker refusing the first dead
// letters and the first offset commits, every record is still handled
// once, its dead letter written once, and the offsets committed to the end.
func TestLoopSurvivesBrokerErrors(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: "in", Partitions: 2}, {Name: "dead", Partitions: 1}})
	var recs []*kgo.Record
	for i := range 100 {
		v := fmt.Sprint("v", i)
		if i == 31 {
			v = "poison"
		}
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte(v)})
	}
	produce(t, brokers, recs...)
	dlq := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0))
	produceFailed := testkit.FailRequests(b, kmsg.Produce, 3, kerr.InvalidRecord)
	commitFailed := testkit.FailRequests(b, kmsg.OffsetCommit, 3, kerr.NotCoordinator)

	var mu sync.Mutex
	handled := map[string]int{}
	stop := run(t, streams.LoopConfig{Cluster: testkit.Cluster(t, brokers), Group: "g", Topics: []string{"in"}, DeadTopic: "dead", Producer: dlq,
		CommitInterval: 100 * time.Millisecond, Logger: testkit.Logger(),
		Handler: func(_ context.Context, r *kgo.Record) error {
			if string(r.Value) == "poison" {
				return streams.Permanentf("poison")
			}
			mu.Lock()
			defer mu.Unlock()
			handled[string(r.Value)]++
			return nil
		}})
	adm := testkit.Admin(t, brokers)
	ctx := testkit.Context(t, time.Minute)
	ends, err := adm.ListEndOffsets(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	if err := streams.WaitCommitted(ctx, adm, "g", ends.Offsets()); err != nil {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		c, _ := adm.FetchOffsets(testkit.Context(t, 10*time.Second), "g")
		t.Fatalf("%v (%d handled, committed %v, failed %d %d)", err, n, c, produceFailed(), commitFailed())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(handled) != 99 {
		t.Errorf("%d records handled, want 99", len(handled))
	}
	for v, n := range handled {
		if n != 1 {
			t.Errorf("%s handled %d times", v, n)
		}
	}
	if dead := deadLetters(t, brokers); len(dead) != 1 || string(dead[0].Value) != "poison" {
		t.Errorf("dead letters %+v, want the poison once", dead)
	}
	if produceFailed() != 3 || commitFailed() != 3 {
		t.Errorf("the broker failed %d produce and %d commit requests, want 3 and 3", produceFailed(), commitFailed())
	}
}

// TestConcurrentLoopSlowRecordHoldsOnlyItsCommit: with Concurrency, a record
// that does not finish occupies one slot: the records after it in its
// partition, of other keys, are handled meanwhile, those of its key wait
// for it, and the group's offset stays before it (a loop stopped then
// commits nothing); once it can finish, everything is handled, each key in
// order, and committed.
func TestConcurrentLoopSlowRecordHoldsOnlyItsCommit(t *testing.T) {
	brokers := setup(t, 1)
	release := make(chan struct{})
	var mu sync.Mutex
	handled := map[string][]int{} // key -> values in the order handled
	cfg := streams.LoopConfig{Cluster: testkit.Cluster(t, brokers), Group: "g", Topics: []string{"in"}, DeadTopic: "dead",
		Concurrency: 4, Logger: testkit.Logger(),
		Handler: func(ctx context.Context, r *kgo.Record) error {
			v, _ := strconv.Atoi(string(r.Value))
			if v == 0 {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			handled[string(r.Key)] = append(handled[string(r.Key)], v)
			return nil
		}}
	recs := []*kgo.Record{{Topic: "in", Key: []byte("a"), Value: []byte("0")}}
	for i := 1; i <= 200; i++ {
		recs = append(recs, &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", i%20), Value: fmt.Appendf(nil, "%d", i)})
	}
	recs = append(recs, &kgo.Record{Topic: "in", Key: []byte("a"), Value: []byte("201")})
	produce(t, brokers, recs...)
	count := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for k, vs := range handled {
			if k != "a" {
				n += len(vs)
			}
		}
		return n
	}
	committed := func() int64 {
		c, err := testkit.Admin(t, brokers).FetchOffsets(testkit.Context(t, 10*time.Second), "g")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := c.Lookup("in", 0)
		if !ok {
			return 0
		}
		return o.At
	}

	stop := run(t, cfg)
	testkit.Eventually(t, 30*time.Second, "the records after the slow one handled", func() bool { return count() == 200 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if at := committed(); at > 0 || len(handled["a"]) != 0 {
		t.Fatalf("committed %d, key a handled %v, while its first record was in flight", at, handled["a"])
	}

	close(release)
	mu.Lock()
	handled = map[string][]int{}
	mu.Unlock()
	stop = run(t, cfg)
	testkit.Eventually(t, 30*time.Second, "everything committed once the slow record can finish", func() bool { return committed() == 202 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(handled["a"], []int{0, 201}) {
		t.Fatalf("key a handled in the order %v", handled["a"])
	}
	for k, vs := range handled {
		if !slices.IsSorted(vs) || len(vs) != 10 && k != "a" {
			t.Fatalf("key %s handled %v", k, vs)
		}
	}
}

// TestReplayWaitsForTheGroupToEmpty: a replay waits for the group's last
// member to go (as a killed one does when its session expires) and then
// runs; one whose member stays past its MemberGrace is refused.
func TestReplayWaitsForTheGroupToEmpty(t *testing.T) {
	brokers := setup(t, 1)
	produce(t, brokers, &kgo.Record{Topic: "in", Value: []byte("x")})
	member := func() *kgo.Client {
		cl := testkit.Client(t, brokers, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"))
		testkit.Eventually(t, 30*time.Second, "the member joined", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			cl.PollFetches(ctx)
			g, err := testkit.Admin(t, brokers).DescribeGroups(testkit.Context(t, 10*time.Second), "g")
			return err == nil && len(g["g"].Members) == 1
		})
		return cl
	}
	r := replay.Spec{Group: "g", Inputs: []string{"in"}}
	adm := testkit.Admin(t, brokers)

	cl := member()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Prepare(testkit.Context(t, time.Minute), adm)
		errc <- err
	}()
	cl.Close() // leaves the group
	if err := <-errc; err != nil {
		t.Fatalf("replay once the member left: %v", err)
	}

	r.MemberGrace = time.Second
	member()
	if _, err := r.Prepare(testkit.Context(t, time.Minute), adm); !errors.Is(err, replay.ErrGroupRunning) {
		t.Fatalf("replay beside a member: %v", err)
	}
}
