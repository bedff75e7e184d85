package streams_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/streams"
)

// The one consume loop: each partition's records reach the handler in
// order; an offset is committed once its record is handled (or
// dead-lettered after the retries).
func ExampleRunLoop() {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	kafka, err := streams.NewCluster(b.Addrs(), nil, streams.ClientSettings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer kafka.Close()
	cl, err := kafka.Producer("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := kafka.Admin().CreateTopics(ctx, 1, 1, nil, "orders", "orders.dead"); err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range []string{"first", "second", "third"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("k"), Value: []byte(v)}).FirstErr(); err != nil {
			fmt.Println(err)
			return
		}
	}
	var mu sync.Mutex
	seen := 0
	err = streams.RunLoop(ctx, streams.LoopConfig{
		Cluster: kafka, Group: "example", Topics: []string{"orders"}, DeadTopic: "orders.dead",
		Handler: func(_ context.Context, r *kgo.Record) error {
			mu.Lock()
			defer mu.Unlock()
			fmt.Printf("%d: %s\n", r.Offset, r.Value)
			if seen++; seen == 3 {
				cancel()
			}
			return nil
		},
	})
	fmt.Println("stopped:", err)
	// Output:
	// 0: first
	// 1: second
	// 2: third
	// stopped: <nil>
}
