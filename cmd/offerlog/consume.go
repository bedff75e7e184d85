package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
)

// consumed is one line of `offerlog consume`.
type consumed struct {
	Key       string `json:"key"`
	Value     any    `json:"value"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp string `json:"timestamp"`
	// Schema is the writer's schema of the value, when it has one.
	Schema string `json:"schema,omitempty"`
	// Undecodable says why the value is shown raw.
	Undecodable string `json:"undecodable,omitempty"`
}

// consumedMembers are consumed's JSON members, key and value first: what
// produce takes back.
var consumedMembers = []string{"key", "value", "partition", "offset", "timestamp", "schema", "undecodable"}

// base64Note ends the undecodable reason of a value consume shows in
// base64 (it was not UTF-8).
const base64Note = " (value shown in base64)"

func runConsume(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("consume", stderr)
	f.brokers()
	fromBeginning := f.Bool("from-beginning", false, "start at the oldest record (default: only new records)")
	maxN := f.Int("max", 0, "stop after N records (0: no limit)")
	timeout := f.Duration("timeout", 0, "stop when no record arrived for this long (0: never); also bounds reaching the brokers "+
		"and finding the topic (default 10s)")
	if err := f.parse(args); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one TOPIC", errUsage)
	}
	reach := defaultTimeout
	if *timeout > 0 {
		reach = *timeout
	}
	if err := checkTopic(ctx, kafka, f.Arg(0), reach); err != nil {
		return err
	}
	start := kgo.NewOffset().AtEnd()
	if *fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enc := json.NewEncoder(stdout)
	var mu sync.Mutex
	n := 0
	last := time.Now()
	if *timeout > 0 {
		// Stop when no record came for the timeout.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(min(*timeout/4, 100*time.Millisecond) + time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				mu.Lock()
				idle := time.Since(last) >= *timeout
				mu.Unlock()
				if idle {
					cancel()
					return
				}
			}
		}()
	}
	var werr error
	err = streams.RunLoop(ctx, streams.LoopConfig{Name: "consume", Cluster: kafka, Topics: []string{f.Arg(0)}, Start: &start,
		Logger: discardLogger(), Handler: func(_ context.Context, r *kgo.Record) error {
			mu.Lock()
			defer mu.Unlock()
			last = time.Now()
			if werr != nil || (*maxN > 0 && n >= *maxN) {
				return nil
			}
			if werr = enc.Encode(consumedOf(r)); werr != nil {
				cancel()
				return nil
			}
			n++
			if *maxN > 0 && n >= *maxN {
				cancel()
			}
			return nil
		}})
	return errors.Join(err, werr)
}

// discardLogger is the logger of the CLI's loops: their warnings are not
// the command's output.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func consumedOf(r *kgo.Record) consumed {
	c := consumed{Key: string(r.Key), Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano)}
	if r.Value == nil {
		return c // a tombstone: value null
	}
	w, v, err := schemas.DecodeJSON(r.Value)
	if err == nil {
		c.Value, c.Schema = v, w.Name
		return c
	}
	c.Undecodable = err.Error()
	if utf8.Valid(r.Value) {
		c.Value = string(r.Value)
	} else {
		c.Value = base64.StdEncoding.EncodeToString(r.Value)
		c.Undecodable += base64Note
	}
	return c
}
