package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/topics"
)

func TestDataSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "t", Partitions: 2, Compacted: true}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	b = testkit.Broker(t, dir)
	recs := testkit.ReadAll(t, b.Addrs(), "t")
	if len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("after restart: %v", recs)
	}
	st, err := topics.List(ctx, testkit.Admin(t, b.Addrs()), []topics.Topic{{Name: "t", Partitions: 2, Compacted: true}})
	if err != nil || len(st[0].Problems) != 0 {
		t.Fatalf("topic config after restart: %+v %v", st, err)
	}
}

func TestListensWhereAsked(t *testing.T) {
	b := testkit.Broker(t, "")
	addr := b.Addrs()[0]
	if _, err := broker.Start(broker.Config{Addr: addr}); err == nil {
		t.Fatalf("a second broker started on the busy address %s", addr)
	}
}
