package table_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// The table groups of these tests keep, per key of "tg.in", the sum of its
// values and the offset of the last record added ("offset:sum"); every sum
// is written to "tg.out". A record handled again (after a crash, before its
// commit) finds its offset in the value and adds nothing, so the table is a
// function of the input: the sum of each key's values.
const (
	tgIn, tgTable, tgOut, tgDead = "tg.in", "tg-table", "tg.out", "tg.dead"
	tgGroup                      = "tg"
)

func tgSetup(t *testing.T) []string {
	t.Helper()
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: tgIn, Partitions: 4}, {Name: tgTable, Partitions: 4, Compacted: true},
		{Name: tgOut, Partitions: 4}, {Name: tgDead, Partitions: 1}})
	return brokers
}

func parseSum(v []byte) (last, sum int64) {
	if v == nil {
		return -1, 0
	}
	a, b, _ := strings.Cut(string(v), ":")
	last, _ = strconv.ParseInt(a, 10, 64)
	sum, _ = strconv.ParseInt(b, 10, 64)
	return last, sum
}

func sumBatch(_ context.Context, b table.BatchTable) error { return sum(b, false) }

// sum adds the batch's records; one that is not a number fails the batch,
// or with mark is dead-lettered by the handler itself.
func sum(b table.BatchTable, mark bool) error {
	in := b.Input()
	keys := make([]string, len(in.Records))
	for i, r := range in.Records {
		keys[i] = string(r.Key)
	}
	vals, err := b.Values(keys)
	if err != nil {
		return err
	}
	for _, r := range in.Records {
		n, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil && mark {
			in.Dead(r, "not a number")
			continue
		}
		if err != nil {
			// The batch fails; the loop handles its records one by one and
			// dead-letters this one alone.
			return streams.Permanentf("not a number: %q", r.Value)
		}
		last, sum := parseSum(vals[string(r.Key)])
		if r.Offset <= last {
			continue
		}
		v := []byte(fmt.Sprintf("%d:%d", r.Offset, sum+n))
		vals[string(r.Key)] = v
		b.Set(string(r.Key), v)
		b.Emit(r, &kgo.Record{Topic: tgOut, Key: r.Key, Value: []byte(strconv.FormatInt(sum+n, 10))})
	}
	return nil
}

func sumGroup(t testing.TB, brokers []string, stateDir string, m *streams.LoopMetrics) *table.Group {
	return &table.Group{
		Streams: table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: stateDir, Replication: 1, Logger: testkit.Logger()},
		Name:    tgGroup, Table: tgTable, Inputs: []string{tgIn}, Outputs: []string{tgOut}, DeadTopic: tgDead,
		Handle: sumBatch, Metrics: m, Logger: testkit.Logger(),
	}
}

// runSums runs a sum group on stateDir until it has committed every record
// of tg.in, then stops it.
func runSums(t *testing.T, brokers []string, stateDir string) {
	runSumsWith(t, brokers, stateDir, sumBatch)
}

// runSumsWith is runSums with handle as the group's handler.
func runSumsWith(t *testing.T, brokers []string, stateDir string, handle func(context.Context, table.BatchTable) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	g := sumGroup(t, brokers, stateDir, streams.NewLoopMetrics(metrics.New()))
	g.Handle = handle
	go func() { errc <- g.Run(ctx) }()
	adm := testkit.Admin(t, brokers)
	wctx := testkit.Context(t, time.Minute)
	ends, err := adm.ListEndOffsets(wctx, tgIn)
	if err == nil {
		err = streams.WaitCommitted(wctx, adm, tgGroup, ends.Offsets())
	}
	cancel()
	if err := errors.Join(err, <-errc); err != nil {
		t.Fatal(err)
	}
}

// produceSums sends n records over keys k0..k(keys-1), record i adding i,
// and returns the sums they add per key.
func produceSums(t *testing.T, brokers []string, from, n, keys int) map[string]int64 {
	t.Helper()
	want := map[string]int64{}
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("k%d", i%keys)
		want[k] += int64(i)
		recs = append(recs, &kgo.Record{Topic: tgIn, Key: []byte(k), Value: []byte(strconv.Itoa(i))})
	}
	cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := cl.ProduceSync(testkit.Context(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return want
}

// checkSums fails unless the changelog, and every local store under
// stateDir, hold exactly the sums of want.
func checkSums(t *testing.T, brokers []string, stateDir string, want map[string]int64) {
	t.Helper()
	table := testkit.Table(t, brokers, tgTable)
	got := map[string]int64{}
	for k, v := range table {
		_, got[k] = parseSum(v)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the changelog holds %v, the input sums to %v", got, want)
	}
	stored := testkit.LocalTable(t, stateDir, tgGroup, tgTable)
	if !maps.EqualFunc(stored, table, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("the local stores hold %d keys that differ from the changelog's %d", len(stored), len(table))
	}
}

func merge(a, b map[string]int64) map[string]int64 {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] += v
	}
	return out
}

// A table group keeps its table as its input implies, in its changelog and
// its local stores; its outputs say each sum; a record it cannot handle is
// dead-lettered alone with the reason; a new member with an empty disk
// restores the table from the changelog, one with its old disk resumes it.
func TestTableGroupKeepsItsTable(t *testing.T) {
	brokers := tgSetup(t)
	dir := t.TempDir()
	want := produceSums(t, brokers, 0, 2_000, 50)
	poison := testkit.Put(t, brokers, tgIn, []byte("k7"), []byte("poison"))
	want = merge(want, produceSums(t, brokers, 2_000, 1_000, 50))
	runSums(t, brokers, dir)
	checkSums(t, brokers, dir, want)

	dead := testkit.ReadAll(t, brokers, tgDead)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want the poison's", len(dead))
	}
	var d schemas.DeadLetter
	if err := schemas.DeadLetters.Decode(dead[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if d.Offset != poison.Offset || d.Partition != poison.Partition || !strings.Contains(d.Reason, `not a number: "poison"`) {
		t.Fatalf("dead letter %+v, want the poison at %d/%d", d, poison.Partition, poison.Offset)
	}
	outs := map[string]int64{}
	for _, r := range testkit.ReadAll(t, brokers, tgOut) {
		outs[string(r.Key)], _ = strconv.ParseInt(string(r.Value), 10, 64)
	}
	if !maps.Equal(outs, want) {
		t.Fatalf("the last outputs say %v, want %v", outs, want)
	}

	// Its old disk: resumed where the store was.
	want = merge(want, produceSums(t, brokers, 3_000, 500, 60))
	runSums(t, brokers, dir)
	checkSums(t, brokers, dir, want)

	// An empty disk: restored from the changelog.
	fresh := t.TempDir()
	want = merge(want, produceSums(t, brokers, 3_500, 500, 60))
	runSums(t, brokers, fresh)
	checkSums(t, brokers, fresh, want)
}

// A group's input read again after its commit was lost (a kill between a
// batch's mark and the commit) skips the records its table holds; a poison
// record after them is still dead-lettered, and the table is unchanged.
func TestTableGroupSkipsWhatItAppliedAndDeadLettersTheRest(t *testing.T) {
	brokers := tgSetup(t)
	dir := t.TempDir()
	want := produceSums(t, brokers, 0, 40, 1) // one key: one partition
	// Dead-letters what is not a number itself, the batch going on.
	marking := func(_ context.Context, b table.BatchTable) error { return sum(b, true) }
	runSumsWith(t, brokers, dir, marking)
	// The commit lost: the group's offsets back at the start.
	adm := testkit.Admin(t, brokers)
	ctx := testkit.Context(t, time.Minute)
	committed, err := adm.FetchOffsets(ctx, tgGroup)
	if err != nil {
		t.Fatal(err)
	}
	var back kadm.Offsets
	committed.Each(func(o kadm.OffsetResponse) { back.AddOffset(o.Topic, o.Partition, 0, -1) })
	if _, err := adm.CommitOffsets(ctx, tgGroup, back); err != nil {
		t.Fatal(err)
	}
	poison := testkit.Put(t, brokers, tgIn, []byte("k0"), []byte("junk"))
	runSumsWith(t, brokers, dir, marking)
	checkSums(t, brokers, dir, want)
	var letters int
	for _, r := range testkit.ReadAll(t, brokers, tgDead) {
		var d schemas.DeadLetter
		if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		if d.Partition != poison.Partition || d.Offset != poison.Offset || d.Reason != "not a number" {
			t.Fatalf("dead letter of %d@%d (%s), want the poison record's %d@%d", d.Offset, d.Partition, d.Reason, poison.Offset, poison.Partition)
		}
		letters++
	}
	if letters != 1 {
		t.Fatalf("%d dead letters, want the poison record's one", letters)
	}
}

// A batch's mark (the input it applied, named in the changelog) rides on
// the partition's next changelog records; the last batches' marks are
// written when the group stops: the changelog then names every
// partition's last input record as applied.
func TestTableGroupMarksItsLastBatchOnStop(t *testing.T) {
	brokers := tgSetup(t)
	produceSums(t, brokers, 0, 400, 40)
	runSums(t, brokers, t.TempDir())
	ends, err := testkit.Admin(t, brokers).ListEndOffsets(testkit.Context(t, time.Minute), tgIn)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range testkit.ReadAll(t, brokers, tgTable) {
		for _, h := range r.Headers {
			if h.Key == "offerlog-applied" {
				seen[string(h.Value)] = true
			}
		}
	}
	ends.Each(func(o kadm.ListedOffset) {
		if m := fmt.Sprintf("%s/%d/%d", tgIn, o.Partition, o.Offset-1); o.Offset > 0 && !seen[m] {
			t.Errorf("no mark %s in the changelog", m)
		}
	})
}

// TestTableGroupProcess is not a test of its own: the kill test runs the
// test binary with it selected, to have a table group it can kill.
func TestTableGroupProcess(t *testing.T) {
	brokers := os.Getenv("OFFERLOG_TEST_TABLEGROUP_BROKERS")
	if brokers == "" {
		t.Skip("runs only as the process TestTableGroupKilledEndsAsTheLogSays kills")
	}
	g := sumGroup(t, strings.Split(brokers, ","), os.Getenv("OFFERLOG_TEST_TABLEGROUP_STATE"), streams.NewLoopMetrics(metrics.New()))
	err := g.Run(context.Background())
	t.Fatalf("the table group returned before it was killed: %v", err)
}

// A table group killed (SIGKILL) while it works, restarted on the same
// disk, ends with the table the input implies, in its changelog and in its
// local stores.
func TestTableGroupKilledEndsAsTheLogSays(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	brokers := tgSetup(t)
	dir := t.TempDir()
	adm := testkit.Admin(t, brokers)
	want := produceSums(t, brokers, 0, 30_000, 300)
	for round := range 3 {
		// The changelog's end offsets, not its records: it is compacted.
		written := func() int64 {
			ends, err := adm.ListEndOffsets(testkit.Context(t, time.Minute), tgTable)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
			return n
		}
		before := written()
		kill := testkit.Child(t, "TestTableGroupProcess", "OFFERLOG_TEST_TABLEGROUP_BROKERS="+strings.Join(brokers, ","),
			"OFFERLOG_TEST_TABLEGROUP_STATE="+dir)
		// Kill it while it works: part of what was sent is in the table.
		testkit.Eventually(t, time.Minute, "the group at work", func() bool {
			return written() > before+100
		})
		kill()
		want = merge(want, produceSums(t, brokers, 30_000+round*10_000, 10_000, 300))
	}
	runSums(t, brokers, dir)
	checkSums(t, brokers, dir, want)
}

// A replay of a table group rebuilds its table from the input alone; the
// outputs of records handled before it are dropped, or written again with
// the replay header (--reemit); those of records never handled are written
// as live.
func TestTableGroupReplays(t *testing.T) {
	brokers := tgSetup(t)
	dir := t.TempDir()
	want := produceSums(t, brokers, 0, 1_000, 20)
	runSums(t, brokers, dir)
	want = merge(want, produceSums(t, brokers, 1_000, 100, 20))

	rebuild := func(mode replay.Outputs) {
		t.Helper()
		g := sumGroup(t, brokers, dir, streams.NewLoopMetrics(metrics.New()))
		g.Streams.Replaying = mode
		spec := replay.Spec{Group: tgGroup, Inputs: []string{tgIn}, Table: tgTable,
			TableConfigs: map[string]string{"cleanup.policy": "compact"}, Partitions: 4, Replication: -1}
		err := table.Replay(testkit.Context(t, 2*time.Minute), g.Streams, spec, func(ctx context.Context, s table.Config) error {
			g.Streams = s
			return g.Run(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		checkSums(t, brokers, dir, want)
	}
	outputs := func() (plain, marked int) {
		for _, r := range testkit.ReadAll(t, brokers, tgOut) {
			if len(r.Headers) == 1 && r.Headers[0].Key == replay.Header {
				marked++
			} else {
				plain++
			}
		}
		return plain, marked
	}

	rebuild(replay.Reemit)
	if plain, marked := outputs(); plain != 1_100 || marked != 1_000 {
		t.Fatalf("after --reemit: %d outputs without the header, %d with; want 1 100 (the first run's and the new records') and 1 000", plain, marked)
	}
	rebuild(replay.TablesOnly)
	if plain, marked := outputs(); plain != 1_100 || marked != 1_000 {
		t.Fatalf("after a replay of the table alone: %d and %d outputs, want no more", plain, marked)
	}
}

// A member with Standby keeps warm copies of the partitions another member
// owns: when that member stops, it takes them over reading only the
// changelog's tail (the stopping member's marks), not the partitions whole,
// and its stores hold the table as the log says. A member without it, on
// an empty disk, reads every partition whole.
func TestTableGroupStandbyTakesOverFromItsCopy(t *testing.T) {
	brokers := tgSetup(t)
	want := produceSums(t, brokers, 0, 4_000, 80)
	adm := testkit.Admin(t, brokers)
	wctx := testkit.Context(t, 2*time.Minute)
	committed := func() { t.Helper(); waitInputCommitted(t, wctx, adm) }
	start := func(g *table.Group) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- g.Run(ctx) }()
		return func() {
			cancel()
			if err := <-errc; err != nil {
				t.Error(err)
			}
		}
	}
	a := sumGroup(t, brokers, t.TempDir(), nil)
	stopA := start(a)
	dirB := t.TempDir()
	b := sumGroup(t, brokers, dirB, nil)
	b.Streams.Standby = true
	stopB := start(b)
	committed()
	// The changelog's end moves while the members join (a revocation
	// writes its marks): read it again until the copies are there.
	var held map[int32]int64
	var ends kadm.ListedOffsets
	var total int64
	defer func() {
		if t.Failed() {
			t.Logf("stores hold %v; the changelog ends at %v", held, ends)
		}
	}()
	testkit.Eventually(t, time.Minute, "the standby's copies at the changelog's end", func() bool {
		var err error
		if ends, err = adm.ListEndOffsets(wctx, tgTable); err != nil {
			return false
		}
		held, total = b.Offsets(), 0
		ok := len(held) == 4
		// A store holds the changelog to its last data record: a
		// partition b owns ends in the commit marker of b's last batch,
		// one b follows as a standby is read to the end.
		last := lastData(t, b.Streams.Cluster, ends)
		ends.Each(func(o kadm.ListedOffset) {
			total += o.Offset
			ok = ok && (held[o.Partition] == o.Offset-1 || held[o.Partition] == last[o.Partition])
		})
		return ok
	})
	before := b.Restored()
	stopA()
	want = merge(want, produceSums(t, brokers, 4_000, 400, 80))
	committed()
	// The stopping member's marks, each a record of its own, are the tail.
	if got := b.Restored() - before; got > 8 {
		t.Fatalf("the standby read %d changelog records to take over (of %d): not from its copies", got, total)
	}
	stopB()
	checkSums(t, brokers, dirB, want)

	dirC := t.TempDir()
	c := sumGroup(t, brokers, dirC, nil)
	stopC := start(c)
	want = merge(want, produceSums(t, brokers, 4_400, 40, 80))
	committed()
	stopC()
	checkSums(t, brokers, dirC, want)
	if c.Restored() < total {
		t.Fatalf("a member on an empty disk read %d changelog records, the changelog had %d before", c.Restored(), total)
	}
}

// lastData returns the offset of each partition's last committed data
// record before ends (not a transaction's marker), -1 for none within
// the last 4 offsets.
func lastData(t *testing.T, c *streams.Cluster, ends kadm.ListedOffsets) map[int32]int64 {
	t.Helper()
	from, end, last := map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		from[o.Partition], end[o.Partition], last[o.Partition] = max(0, o.Offset-4), o.Offset, -1
	})
	err := streams.ReadRange(testkit.Context(t, time.Minute), c, tgTable, from, end, func(r *kgo.Record) {
		last[r.Partition] = max(last[r.Partition], r.Offset)
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// A member given a partition fences every earlier writer of it before it
// restores: a transaction an earlier holder left open (a member cut off
// past its session, its batch still on the wire) is aborted, and that
// holder can commit nothing after, however late its requests arrive. So
// the changelog and the stores hold exactly the input's sums, and never a
// value decided on a table the new holder has changed since.
func TestTableGroupFencesAnEarlierWriter(t *testing.T) {
	brokers := tgSetup(t)
	ctx := testkit.Context(t, 2*time.Minute)
	c := testkit.Cluster(t, brokers)
	// The earlier holder of partition 0: its batch written, not committed.
	// Its transaction would outlast the test: only a fence ends it.
	zombie, err := c.Transactional("zombie", topics.Table(tgTable).Writer(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	stale := &kgo.Record{Topic: tgTable, Partition: 0, Key: []byte("k0"), Value: []byte("1000000:-1")}
	if err := zombie.ProduceSync(ctx, stale).FirstErr(); err != nil {
		t.Fatal(err)
	}

	want := produceSums(t, brokers, 0, 2_000, 40)
	dir := t.TempDir()
	runSums(t, brokers, dir)
	// Its commit arrives after the new holder's writes, and is refused;
	// so is anything it writes next.
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the earlier holder committed its batch after the partition's next holder wrote")
	}
	checkSums(t, brokers, dir, want)
	for _, r := range testkit.ReadAll(t, brokers, tgTable) {
		if string(r.Value) == string(stale.Value) {
			t.Fatalf("the earlier holder's value is in the changelog at %d", r.Offset)
		}
	}
}

// A member cut off from the brokers past its session, with a batch on the
// wire, must never land that batch after the partition's next holder has
// written: its values were decided on a table the holder has changed
// since. Member a holds a batch and its link is cut; member b takes every
// partition, adds records, and stops; the link is mended, what a sent
// arrives, and a (started again by its supervisor, as the platform's is)
// takes every partition back and adds more. The changelog and a's stores
// must then hold exactly the input's sums. On the runtime before
// 2026-12-03 (two plain produces a batch, no fencing) every key a's late
// batch wrote came back to its stale value.
func TestTableGroupFencesAMemberThatLostItsPartitions(t *testing.T) {
	brokers := tgSetup(t)
	adm := testkit.Admin(t, brokers)
	ctx := testkit.Context(t, 3*time.Minute)
	committed := func() { t.Helper(); waitInputCommitted(t, ctx, adm) }
	want := produceSums(t, brokers, 0, 400, 40)

	// Member a, through a link, under a supervisor that starts it again
	// when it fails; its first run holds the batch with key "hold".
	link := testkit.NewLink()
	dirA := t.TempDir()
	held, release := make(chan struct{}), make(chan struct{})
	var holding sync.Once
	actx, stopA := context.WithCancel(context.Background())
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		for actx.Err() == nil {
			a := sumGroup(t, brokers, dirA, nil)
			a.Streams.Cluster = link.Over(t, brokers)
			a.Handle = func(ctx context.Context, b table.BatchTable) error {
				if slices.ContainsFunc(b.Input().Records, func(r *kgo.Record) bool { return string(r.Key) == "hold" }) {
					holding.Do(func() {
						close(held)
						<-release
					})
				}
				return sumBatch(ctx, b)
			}
			if err := a.Run(actx); err != nil {
				t.Logf("member a failed (its supervisor starts it again): %v", err)
			}
		}
	}()
	defer func() { stopA(); <-aDone }()
	committed()
	// The held batch: a record of every key, then "hold" (a batch of its
	// partition holds the keys before it that share the partition).
	var recs []*kgo.Record
	for k := range want {
		recs = append(recs, &kgo.Record{Topic: tgIn, Key: []byte(k), Value: []byte("1")})
		want[k]++
	}
	recs = append(recs, &kgo.Record{Topic: tgIn, Key: []byte("hold"), Value: []byte("1")})
	want["hold"] = 1
	cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("member a never held its batch")
	}
	link.Cut()
	close(release) // a's batch goes on the wire, and waits there

	// Member b takes every partition once a's session ended.
	bctx, stopB := context.WithCancel(context.Background())
	bDone := make(chan error, 1)
	go func() { bDone <- sumGroup(t, brokers, t.TempDir(), nil).Run(bctx) }()
	want = merge(want, produceSums(t, brokers, 400, 400, 40))
	committed()
	stopB()
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}

	link.Mend()
	want = merge(want, produceSums(t, brokers, 800, 400, 40))
	committed()
	stopA()
	<-aDone
	checkSums(t, brokers, dirA, want)
}

// waitInputCommitted waits until the group has committed every record of
// tg.in written so far.
func waitInputCommitted(t *testing.T, ctx context.Context, adm *kadm.Client) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, tgIn)
	if err == nil {
		err = streams.WaitCommitted(ctx, adm, tgGroup, ends.Offsets())
	}
	if err != nil {
		t.Fatal(err)
	}
}
