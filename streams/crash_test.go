package streams_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestLoopProcess is not a test of its own: TestLoopKilledLosesNothing runs
// the test binary with it selected, to have a loop in a process it kills.
// The loop copies "in" to "out", keyed by where each record came from.
func TestLoopProcess(t *testing.T) {
	brokers := os.Getenv("OFFERLOG_TEST_LOOP_BROKERS")
	if brokers == "" {
		t.Skip("runs only as the process TestLoopKilledLosesNothing kills")
	}
	kafka := testkit.Cluster(t, strings.Split(brokers, ","))
	out, err := kafka.Producer("loop-test")
	if err != nil {
		t.Fatal(err)
	}
	err = streams.RunLoop(context.Background(), streams.LoopConfig{Cluster: kafka, Group: "copy",
		Topics: []string{"in"}, DeadTopic: "dead", Logger: testkit.Logger(),
		// Static membership: the restarted process takes the killed one's
		// place at once instead of after its session timeout.
		ClientOptions: []kgo.Opt{kgo.InstanceID("copy-0")},
		BatchHandler: func(ctx context.Context, b *streams.Batch) error {
			recs := make([]*kgo.Record, 0, len(b.Records))
			for _, r := range b.Records {
				recs = append(recs, &kgo.Record{Topic: "out", Key: fmt.Appendf(nil, "%d/%d", r.Partition, r.Offset), Value: r.Value})
			}
			return out.ProduceSync(ctx, recs...).FirstErr()
		}})
	t.Fatalf("the loop returned before it was killed: %v", err)
}

// TestLoopKilledLosesNothing kills a loop's process (SIGKILL) at random
// moments while records arrive, restarts it each time, and checks that
// every input record was handled (its effect, a copy keyed by its
// position, is on "out") and that what was handled twice is only what came
// after the last commit before a kill.
func TestLoopKilledLosesNothing(t *testing.T) {
	kills := 8
	if testing.Short() {
		kills = 2
	}
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: "in", Partitions: 4}, {Name: "out", Partitions: 4}, {Name: "dead", Partitions: 1}})
	p := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, 5*time.Minute)
	sent := 0
	env := "OFFERLOG_TEST_LOOP_BROKERS=" + strings.Join(brokers, ",")
	for range kills {
		before := len(testkit.ReadAll(t, brokers, "out"))
		kill := testkit.Child(t, "TestLoopProcess", env)
		for range 1 + rand.IntN(5) {
			var recs []*kgo.Record
			for range 200 {
				sent++
				recs = append(recs, &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", sent%50), Value: fmt.Appendf(nil, "%d", sent)})
			}
			if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		// Killed while it works: once it has copied some of this round.
		testkit.Eventually(t, time.Minute, "the loop copies", func() bool {
			return len(testkit.ReadAll(t, brokers, "out")) > before
		})
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond) // the kill lands anywhere: that is the point
		kill()
	}
	testkit.Child(t, "TestLoopProcess", env)
	adm := testkit.Admin(t, brokers)
	ends, err := adm.ListEndOffsets(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	if err := streams.WaitCommitted(ctx, adm, "copy", ends.Offsets()); err != nil {
		t.Fatal(err)
	}
	copies := map[string]int{}
	for _, r := range testkit.ReadAll(t, brokers, "out") {
		copies[string(r.Key)]++
	}
	in := testkit.ReadAll(t, brokers, "in")
	twice := 0
	for _, r := range in {
		switch n := copies[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]; {
		case n == 0:
			t.Errorf("in %d/%d (%s) was never handled", r.Partition, r.Offset, r.Value)
		case n > 1:
			twice++
		}
	}
	if len(in) != sent {
		t.Fatalf("%d records in, %d sent", len(in), sent)
	}
	t.Logf("%d kills, %d records, %d handled again after a kill", kills, sent, twice)
}
