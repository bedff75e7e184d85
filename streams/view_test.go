package streams_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/third_party/forked/goka"
	"github.com/offerlog/offerlog/third_party/forked/goka/codec"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestAViewThatStoppedLeavesNoClient runs views with offerlog's options
// and stops them: no sarama client of theirs is left running (goka's View
// never closed the consumer and topic manager it made: third_party/forked/goka patch
// 1), so a process that restarts its views does not pile clients up.
func TestAViewThatStoppedLeavesNoClient(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	table := goka.Table("leak-table")
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: string(table), Partitions: 4, Compacted: true}})
	cfg := streams.Config{Brokers: brokers, StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	for i := range 3 {
		v, err := goka.NewView(brokers, table, new(codec.String), cfg.ViewOptions("leak")...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- v.Run(ctx) }()
		select {
		case <-v.WaitRunning():
		case err := <-done:
			t.Fatalf("view %d stopped: %v", i, err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("view %d: %v", i, err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "no sarama client left running", func() bool {
		buf := make([]byte, 1<<22)
		stacks := string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(stacks, "sarama.(*client).backgroundMetadataUpdater")
	})
}
