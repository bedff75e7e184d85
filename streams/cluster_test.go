package streams_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestEveryCompressionIsReadByAnotherClient: what offerlog's producers
// write with each --compression is read back as it was by kcat
// (librdkafka) and by franz-go; the setting is what the batches carry.
func TestEveryCompressionIsReadByAnotherClient(t *testing.T) {
	kcat, _ := testkit.LookTool(t, "kcat")
	brokers := testkit.Broker(t, "").Addrs()
	value := bytes.Repeat([]byte("offerlog "), 200)
	for i, codec := range streams.Compressions { // in Kafka's codec order: none 0, gzip 1, snappy 2, lz4 3, zstd 4
		topic := "compressed-" + codec
		testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: topic, Partitions: 1}})
		kafka, err := streams.NewCluster(brokers, nil, streams.ClientSettings{Compression: codec})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
		kafka.Close()
		if err != nil {
			t.Fatal(err)
		}
		err = cl.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topic, Key: []byte("k"), Value: value}).FirstErr()
		cl.Close()
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		recs := testkit.ReadAll(t, brokers, topic)
		if len(recs) != 1 || !bytes.Equal(recs[0].Value, value) {
			t.Fatalf("%s: franz-go read %d records", codec, len(recs))
		}
		if got := recs[0].Attrs.CompressionType(); got != uint8(i) {
			t.Fatalf("%s: the batch carries codec %d", codec, got)
		}
		if kcat == "" {
			continue
		}
		out, err := exec.Command(kcat, "-C", "-b", brokers[0], "-t", topic, "-e", "-q", "-f", "%s").CombinedOutput()
		if err != nil || !bytes.Equal(out, value) {
			t.Fatalf("%s: kcat read %q (%v)", codec, out[:min(len(out), 80)], err)
		}
	}
	if _, err := streams.NewCluster(brokers, nil, streams.ClientSettings{Compression: "brotli"}); err == nil {
		t.Fatal("an unknown compression was taken")
	}
}

// TestProduceSyncEndsWithItsContext: a produce in flight to a broker that
// does not answer (killed, partitioned away) ends when its context ends,
// so that a component stopping, or giving up a partition, is not held
// for ever by a write (franz-go's idempotent producer otherwise waits for
// the broker's answer, whatever the context says).
func TestProduceSyncEndsWithItsContext(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: "held", Partitions: 1}})
	cl, err := testkit.Cluster(t, brokers).Producer("held")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	// The client knows the topic before the broker stops answering.
	if err := cl.ProduceSync(testkit.Context(t, 30*time.Second), &kgo.Record{Topic: "held", Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	release, held := make(chan struct{}), make(chan struct{}, 1)
	t.Cleanup(func() { close(release) })
	b.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		select {
		case held <- struct{}{}:
		default:
		}
		b.SleepControl(func() { <-release })
		return nil, nil, false
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.ProduceSync(ctx, &kgo.Record{Topic: "held", Value: []byte("held")}).FirstErr() }()
	<-held // in flight: the broker has the request
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ProduceSync ended with %v, want the context's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ProduceSync still waits for the broker 30 s after its context ended")
	}
}
