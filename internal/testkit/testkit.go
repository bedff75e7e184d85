// Package testkit starts the real parts tests run against (the embedded
// Kafka-protocol broker, its topics) and waits for conditions with a
// deadline instead of sleeping.
package testkit

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Logger returns a logger for tests: warnings and errors only, unless
// OFFERLOG_TEST_DEBUG is set.
func Logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("OFFERLOG_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Broker starts an embedded broker for the test, in memory or in dataDir
// if it is not "", and stops it when the test ends. It returns the broker.
func Broker(t testing.TB, dataDir string) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Config{DataDir: dataDir, Addr: "127.0.0.1:0", Logger: Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// Kafka names the cluster a helper talks to: its broker addresses (a
// plaintext cluster, as testkit.Broker starts) or a *streams.Cluster (one
// that needs credentials or settings).
type Kafka interface {
	[]string | *streams.Cluster
}

// Cluster returns the plaintext cluster of brokers with the default
// client settings, closed when the test ends.
func Cluster(t testing.TB, brokers []string) *streams.Cluster {
	t.Helper()
	c, err := streams.NewCluster(brokers, nil, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// ClusterOf returns the cluster k names, closed when the test ends if
// made here.
func ClusterOf[K Kafka](t testing.TB, k K) *streams.Cluster {
	t.Helper()
	if c, ok := any(k).(*streams.Cluster); ok {
		return c
	}
	return Cluster(t, any(k).([]string))
}

// connectOptions are the options that reach the cluster k and no more
// (Cluster.ConnectOptions), without a Cluster of its own for addresses.
func connectOptions[K Kafka](k K) []kgo.Opt {
	if c, ok := any(k).(*streams.Cluster); ok {
		return c.ConnectOptions()
	}
	return []kgo.Opt{kgo.SeedBrokers(any(k).([]string)...)}
}

// WithCluster calls fn with the cluster k names, closed after it if made
// here.
func WithCluster[K Kafka](k K, fn func(*streams.Cluster) error) error {
	if c, ok := any(k).(*streams.Cluster); ok {
		return fn(c)
	}
	c, err := streams.NewCluster(any(k).([]string), nil, streams.ClientSettings{})
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// Client returns a franz-go client of the cluster k, with its credentials
// if it has some, closed when the test ends. It is a bare client, as
// another program's would be: franz-go's defaults, not offerlog's
// settings.
func Client[K Kafka](t testing.TB, k K, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(connectOptions(k), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client of the cluster k.
func Admin[K Kafka](t testing.TB, k K) *kadm.Client {
	return kadm.NewClient(Client(t, k))
}

// EnsureTopics creates ts on the cluster k.
func EnsureTopics[K Kafka](t testing.TB, k K, ts []topics.Topic) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := topics.Ensure(ctx, Admin(t, k), -1, ts); err != nil {
		t.Fatal(err)
	}
}

// Context returns a context that ends with the test or after d.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 20 ms until it returns true, and fails the
// test with msg if it has not by the deadline.
func Eventually(t testing.TB, d time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", d, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ReadAll returns every record of topic up to its end offsets at the time
// of the call, in partition then offset order (streams.ReadToEnd: done by
// offsets, never by a silence). topic is a topics.Table or any name.
func ReadAll[K Kafka, T ~string](t testing.TB, k K, topic T) []*kgo.Record {
	t.Helper()
	byPart := map[int32][]*kgo.Record{}
	// A cluster for the call, not for the test: ReadAll is called in
	// loops (Eventually), and each cluster holds an admin client.
	err := WithCluster(k, func(c *streams.Cluster) error {
		return streams.ReadToEnd(Context(t, 60*time.Second), c, string(topic), func(r *kgo.Record) {
			byPart[r.Partition] = append(byPart[r.Partition], r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*kgo.Record
	for p := int32(0); len(byPart) > 0; p++ {
		out = append(out, byPart[p]...)
		delete(byPart, p)
	}
	return out
}

// WaitGroupsEmpty waits up to a minute until none of groups has a member
// (their members left, or their sessions ended): a replay must run alone.
func WaitGroupsEmpty[K Kafka](t testing.TB, k K, groups ...string) {
	t.Helper()
	adm := Admin(t, k)
	Eventually(t, time.Minute, fmt.Sprintf("no members left in %v", groups), func() bool {
		described, err := adm.DescribeGroups(Context(t, 10*time.Second), groups...)
		if err != nil {
			return false
		}
		for _, g := range described {
			if len(g.Members) > 0 {
				return false
			}
		}
		return true
	})
}
