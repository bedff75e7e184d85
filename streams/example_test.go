package streams_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/streams"
)

// A processor in goka's model: a group whose table counts the records of
// each key and which emits the count. The Tester runs its callback without
// a broker; Graph.Run runs the same graph on a cluster.
func ExampleTester() {
	g := &streams.Graph{
		Group: "counter",
		Codec: streams.Bytes{},
		Inputs: []streams.Input{{Topic: "clicks", Callback: func(ctx streams.Context, _ []byte) {
			n := 0
			if v, ok := ctx.Value().([]byte); ok {
				n, _ = strconv.Atoi(string(v))
			}
			n++
			ctx.SetValue([]byte(strconv.Itoa(n)))
			ctx.Emit("counts", ctx.Key(), []byte(strconv.Itoa(n)))
		}}},
		Outputs: []streams.Output{{Topic: "counts", Codec: streams.Bytes{}}},
	}
	tt := streams.NewTester(g)
	for _, user := range []string{"ann", "bob", "ann"} {
		out, err := tt.Consume("clicks", 0, user, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s -> %s: %s\n", user, out[0].Topic, out[0].Value)
	}
	fmt.Printf("table: ann=%s bob=%s\n", tt.Value("ann"), tt.Value("bob"))
	// Output:
	// ann -> counts: 1
	// bob -> counts: 1
	// ann -> counts: 2
	// table: ann=2 bob=1
}

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
