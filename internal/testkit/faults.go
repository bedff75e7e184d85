package testkit

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/internal/broker"
)

// brokerDirEnv names the data directory of a broker that runs in a process
// of its own (BrokerProcess, ServeBroker).
const (
	brokerDirEnv     = "OFFERLOG_TEST_BROKER_DIR"
	brokerCompactEnv = "OFFERLOG_TEST_BROKER_COMPACT_EVERY"
)

// ServeBroker is the body of a package's TestBrokerProcess: in a process
// that BrokerProcess started, it runs the embedded broker on the data
// directory it was given, compacting as often as it was told, until the
// process is killed; anywhere else it skips.
func ServeBroker(t *testing.T) {
	dir := os.Getenv(brokerDirEnv)
	if dir == "" {
		t.Skip("runs as the broker process of a kill test")
	}
	addr, err := os.ReadFile(filepath.Join(dir, "listen"))
	if err != nil {
		t.Fatal(err)
	}
	every, _ := time.ParseDuration(os.Getenv(brokerCompactEnv))
	b, err := broker.Start(broker.Config{DataDir: dir, Addr: string(addr), CompactEvery: every, Logger: Logger()})
	if err != nil {
		t.Fatal(err)
	}
	addrFile := filepath.Join(dir, "addr")
	if err := os.WriteFile(addrFile+".tmp", []byte(strings.Join(b.Addrs(), ",")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(addrFile+".tmp", addrFile); err != nil {
		t.Fatal(err)
	}
	select {} // until SIGKILL
}

// BrokerProcess starts the embedded broker on dataDir in a process of its
// own (the package's TestBrokerProcess must call ServeBroker), compacting
// compacted topics every compactEvery (0: the broker's default; a
// millisecond keeps it compacting all the time, and busy). It returns the
// broker's addresses
// and kill, which sends it SIGKILL. Started again on the same directory,
// the broker listens on the same address and loads what the killed one
// left: its clients find it again.
func BrokerProcess(t *testing.T, dataDir string, compactEvery time.Duration) (addrs []string, kill func()) {
	t.Helper()
	listen := filepath.Join(dataDir, "listen")
	if _, err := os.Stat(listen); errors.Is(err, os.ErrNotExist) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if err := os.WriteFile(listen, []byte(addr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addrFile := filepath.Join(dataDir, "addr")
	if err := os.Remove(addrFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	kill = Child(t, "TestBrokerProcess", brokerDirEnv+"="+dataDir, brokerCompactEnv+"="+compactEvery.String())
	var data []byte
	Eventually(t, time.Minute, "the broker process did not start", func() bool {
		var err error
		data, err = os.ReadFile(addrFile)
		return err == nil
	})
	return strings.Split(string(data), ","), kill
}

// FailRequests makes the broker answer the next n requests of kind key
// (kmsg.Produce, kmsg.Fetch, kmsg.OffsetCommit ...) with the error code of
// err, for every partition the request names, as a broker in trouble would.
// It returns how many it has failed so far.
func FailRequests(b *broker.Broker, key kmsg.Key, n int, err *kerr.Error) (failedSoFar func() int) {
	var failedN atomic.Int64
	b.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if failedN.Add(1) < int64(n) {
			b.KeepControl()
		} else {
			b.DropControl() // kfake keeps a function once kept
		}
		resp := failed(req, err.Code)
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	return func() int { return int(failedN.Load()) }
}

// failed returns the response to req that fails every partition with code.
func failed(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.FetchRequest:
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = code
		return resp
	default:
		resp := req.ResponseKind()
		if e, ok := resp.(interface{ SetErrorCode(int16) }); ok {
			e.SetErrorCode(code)
		}
		return resp
	}
}

// Put writes value under key on topic (partition by the key's hash, as
// every producer of the platform does), whatever the bytes: garbage for
// poison tests. topic is a topics.Table or any name.
func Put[K Kafka, T ~string](t testing.TB, brokers K, topic T, key, value []byte) *kgo.Record {
	t.Helper()
	cl := Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: string(topic), Key: key, Value: value}).First()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
