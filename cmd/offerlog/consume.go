package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
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

func runConsume(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("consume", stderr)
	brokers := f.brokers()
	fromBeginning := f.Bool("from-beginning", false, "start at the oldest record (default: only new records)")
	maxN := f.Int("max", 0, "stop after N records (0: no limit)")
	timeout := f.Duration("timeout", 0, "stop when no record arrived for this long (0: never)")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := requireBrokers(brokers); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one TOPIC", errUsage)
	}
	start := kgo.NewOffset().AtEnd()
	if *fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(*brokers...), kgo.ConsumeTopics(f.Arg(0)), kgo.ConsumeResetOffset(start),
		kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	enc := json.NewEncoder(stdout)
	n := 0
	for {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if *timeout > 0 {
			pollCtx, cancel = context.WithTimeout(ctx, *timeout)
		}
		fs := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil || (pollCtx.Err() != nil && fs.NumRecords() == 0) {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded && err != context.Canceled {
				ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			if err := enc.Encode(consumedOf(r)); err != nil {
				return err
			}
			n++
			if *maxN > 0 && n >= *maxN {
				return nil
			}
		}
	}
}

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
		c.Undecodable += " (value shown in base64)"
	}
	return c
}
