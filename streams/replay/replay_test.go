package replay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/topics"
)

func TestReplayRefusesAPartOfTheHistory(t *testing.T) {
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: "in", Partitions: 2}})
	cl := testkit.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 4 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	r := replay.Spec{Group: "g", Inputs: []string{"in"}}
	if _, err := r.Prepare(ctx, adm); err != nil {
		t.Fatalf("a whole history: %v", err)
	}
	// Retention (here DeleteRecords) removes partition 1's first record.
	del := kadm.Offsets{}
	del.AddOffset("in", 1, 1, -1)
	resp, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	starts, _ := adm.ListStartOffsets(ctx, "in")
	t.Logf("start offsets after DeleteRecords: %v", starts)
	_, err = r.Prepare(ctx, adm)
	if !errors.Is(err, replay.ErrPartialHistory) {
		t.Fatalf("a history missing its start: %v, want ErrPartialHistory", err)
	}
	if want := "in partition 1: offsets 0 to 0 are gone (first missing 0, first kept 1)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("the refusal %q does not say %q", err, want)
	}
	r.AllowGaps = true
	if _, err := r.Prepare(ctx, adm); err != nil {
		t.Fatalf("with AllowGaps: %v", err)
	}
}
