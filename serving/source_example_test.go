package serving_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/offerlog/offerlog/serving"
)

// priceList is a Source that is not a table topic: a service's own prices
// (here a map and a channel of changes; a database and its change feed
// alike), in one partition.
type priceList struct {
	prices  map[int]float64
	changes chan serving.Entry
}

func (p *priceList) Partitions(context.Context) (int32, error) { return 1, nil }

func (p *priceList) Sync(ctx context.Context, _, _ int32, apply func([]serving.Entry) error, loaded func(map[int32]int64)) error {
	var all []serving.Entry
	for id, price := range p.prices {
		all = append(all, serving.Entry{Key: strconv.Itoa(id), Value: []byte(strconv.FormatFloat(price, 'f', -1, 64)), Offset: -1})
	}
	if err := apply(all); err != nil {
		return err
	}
	loaded(nil)
	for {
		select {
		case e := <-p.changes:
			if err := apply([]serving.Entry{e}); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// The cache is a template any service can use: a server materialises a
// Source of its own (not a table topic), and a Typed client reads typed
// keys and values, each key sent to the replicas of its shard.
func ExampleTyped() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prices := &priceList{prices: map[int]float64{1: 100, 2: 9000.5}, changes: make(chan serving.Entry)}
	srv, err := serving.NewServer(serving.ServerConfig{Source: prices, Table: "prices", Shards: 1, DC: "dc1", Host: "h1",
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
	cache := serving.Typed[int, float64]{Client: client, Key: strconv.Itoa,
		Decode: func(b []byte) (float64, error) { return strconv.ParseFloat(string(b), 64) }}
	for !srv.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	got, err := cache.Get(ctx, 1, 2, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	prices.changes <- serving.Entry{Key: "1", Value: []byte("95"), Offset: -1} // applied once Sync takes it
	for got[1] != 95 {
		if got, err = cache.Get(ctx, 1); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(got)
	// Output:
	// map[1:100 2:9000.5]
	// map[1:95]
}
