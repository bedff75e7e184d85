package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/zkconn"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// runGet reads keys through the serving cache's client and prints one line
// per key: the key, a tab, and the value as JSON (null when the table holds
// none).
func runGet(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("get", stderr)
	table := f.String("table", string(topics.OffersTable), "the table topic the cache serves")
	zkServers := f.String("zookeeper", "", "ZooKeeper ensemble host:port,... where cache servers register")
	hosts := f.String("hosts", serving.DefaultAddr, "comma-separated cache servers, when not found in ZooKeeper")
	timeout := f.Duration("timeout", 10*time.Second, "how long to wait for the answer")
	token := f.token()
	tlsCA := f.tlsCA("the cache's TLS certificate")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() == 0 {
		return fmt.Errorf("%w: which keys?", errUsage)
	}
	log := f.logger(stderr)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// A shard owner may be starting: wait for one as long as for the answer.
	cfg := serving.ClientConfig{Hosts: serving.StaticHosts(strings.Split(*hosts, ",")...), PingPeriod: 200 * time.Millisecond,
		NoShardWait: *timeout, Logger: log}
	if ca := token.defaultCA(tlsCA, stderr); ca != "" {
		t, err := streams.ClientTLS(ca)
		if err != nil {
			return err
		}
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithTransportCredentials(credentials.NewTLS(t)))
	}
	if t, err := token.get(); err != nil {
		return err
	} else if t != "" {
		cfg.DialOptions = append(cfg.DialOptions, auth.BearerDial(t))
	}
	if *zkServers != "" {
		conn, _, err := zkconn.Dial(ctx, *zkServers, 10*time.Second, log)
		if err != nil {
			return err
		}
		defer conn.Close()
		cfg.Hosts = func(context.Context) ([]string, error) { return serving.Hosts(conn, *table) }
	}
	client := serving.NewClient(cfg)
	go func() { _ = client.Run(ctx) }()
	values, err := client.Get(ctx, f.Args())
	if err != nil {
		return err
	}
	for _, k := range f.Args() {
		out := []byte("null")
		if v, ok := values[k]; ok {
			if _, js, err := schemas.DecodeJSON(v); err == nil {
				out, _ = json.Marshal(js)
			} else {
				out, _ = json.Marshal(v) // not Avro: the raw bytes, base64
			}
		}
		fmt.Fprintf(stdout, "%s\t%s\n", k, out)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
