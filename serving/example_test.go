package serving_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
)

// A cache server holds a shard of a compacted table in memory; a client
// sends each key to the replicas of its shard. Here one server holds the
// one shard (serving.Static); a fleet claims shards in ZooKeeper
// (DialOwner) and a client finds them there (Hosts).
func ExampleClient() {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	if _, err := kafka.Admin().CreateTopics(ctx, 4, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "prices"); err != nil {
		fmt.Println(err)
		return
	}
	for k, v := range map[string]string{"bike": "100", "car": "9000"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "prices", Key: []byte(k), Value: []byte(v)}).FirstErr(); err != nil {
			fmt.Println(err)
			return
		}
	}

	srv, err := serving.NewServer(serving.ServerConfig{Cluster: kafka, Table: "prices", Shards: 1, DC: "dc1", Host: "h1",
		Owner: serving.Static{Shard: 0}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	client := serving.NewClient(serving.ClientConfig{Hosts: serving.StaticHosts(ln.Addr().String()), Table: "prices",
		PingPeriod: 50 * time.Millisecond})
	ran := make(chan error, 1)
	go func() { ran <- client.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	for !srv.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	values, err := client.Get(ctx, []string{"bike", "car", "boat"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("bike=%s car=%s boat found: %v\n", values["bike"], values["car"], values["boat"] != nil)
	// Output:
	// bike=100 car=9000 boat found: false
}
