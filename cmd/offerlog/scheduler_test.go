package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestSchedulerRedrive: `offerlog scheduler redrive STAGE` queues again the
// offers of the stage's dead letters (of both its queues, another stage's
// left alone), once: a second redrive finds nothing new.
func TestSchedulerRedrive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), topics.Catalogue(2))
	var dead []*kgo.Record
	for _, src := range []*kgo.Record{
		{Topic: topics.QueueTopic("price", false), Key: []byte("11111111111"), Value: []byte("item")},
		{Topic: topics.QueueTopic("price", true), Key: []byte("22222222222"), Value: []byte("item")},
		{Topic: topics.QueueTopic("photos", false), Key: []byte("33333333333"), Value: []byte("item")},
	} {
		d, err := streams.DeadLetterRecord(topics.SchedulerDead, "g", src, "stage failed 5 times")
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, d)
	}
	if err := testkit.Client(t, b.Addrs()).ProduceSync(testkit.Context(t, 30*time.Second), dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := offerlog(t, "", "scheduler", "redrive", "--brokers", addr); code != 2 || !strings.Contains(stderr, "STAGE") {
		t.Fatalf("without a stage: %d %s", code, stderr)
	}
	// A stage that is not configured is refused (its commands would be).
	if code, _, stderr := offerlog(t, "", "scheduler", "redrive", "price", "--brokers", addr); code != 2 || !strings.Contains(stderr, `no stage "price"`) {
		t.Fatalf("a stage not configured: %d %s", code, stderr)
	}
	stages := filepath.Join(t.TempDir(), "stages.yaml")
	if err := os.WriteFile(stages, []byte("stages:\n- name: price\n  address: price:9000\n- name: photos\n  address: photos:9000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OFFERLOG_STAGES", stages)
	code, out, stderr := offerlog(t, "", "scheduler", "redrive", "price", "--brokers", addr)
	if code != 0 || !strings.Contains(out, "queued 2 offers again for price (2 dead letters)") {
		t.Fatalf("redrive: %d %s%s", code, out, stderr)
	}
	got := map[string]bool{}
	for _, r := range testkit.ReadAll(t, b.Addrs(), topics.OffersCommands) {
		var c schemas.OfferCommand
		if err := schemas.OfferCommands.Decode(r.Value, &c); err != nil {
			t.Fatal(err)
		}
		if c.Kind != schemas.CommandEnqueue || c.Stage != "price" || c.Low != (c.OfferID == "22222222222") {
			t.Fatalf("command %+v", c)
		}
		got[c.OfferID] = true
	}
	if len(got) != 2 || !got["11111111111"] || !got["22222222222"] {
		t.Fatalf("queued %v", got)
	}
	code, out, stderr = offerlog(t, "", "scheduler", "redrive", "price", "--brokers", addr)
	if code != 0 || !strings.Contains(out, "queued 0 offers again for price (0 dead letters)") {
		t.Fatalf("second redrive: %d %s%s", code, out, stderr)
	}
}
