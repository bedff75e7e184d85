package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

func runProduce(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("produce", stderr)
	brokers := f.brokers()
	raw := f.Bool("raw", false, "write each value as given (a JSON string's text, or the JSON), without a schema")
	timeout := f.Duration("timeout", defaultTimeout, "how long to wait for the brokers, to find the topic, and for each write")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := requireBrokers(brokers); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return fmt.Errorf("%w: want one TOPIC", errUsage)
	}
	topic := f.Arg(0)
	var schema *schemas.Schema
	if !*raw {
		name, ok := topics.SchemaFor(topic)
		if !ok {
			return fmt.Errorf("topic %q has no schema in the catalogue (use --raw to write plain values)", topic)
		}
		var err error
		if schema, err = schemas.Current(name); err != nil {
			return err
		}
	}
	if err := checkTopic(ctx, *brokers, topic, *timeout); err != nil {
		return err
	}
	cl, err := streams.NewClient(*brokers, kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(*timeout))
	if err != nil {
		return err
	}
	defer cl.Close()

	type result struct {
		line int
		err  error
	}
	results := make(chan result, 1024)
	var bad, inflight, written int
	drain := func(block bool) {
		for inflight > 0 {
			var r result
			if block {
				r = <-results
			} else {
				select {
				case r = <-results:
				default:
					return
				}
			}
			inflight--
			if r.err != nil {
				bad++
				fmt.Fprintf(stderr, "line %d: not written: %v\n", r.line, r.err)
			} else {
				written++
			}
		}
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		rec, err := recordOf(text, schema)
		if err != nil {
			bad++
			fmt.Fprintf(stderr, "line %d: %v\n", line, err)
			continue
		}
		n := line
		inflight++
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { results <- result{n, err} })
		drain(false)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	drain(true)
	fmt.Fprintf(stderr, "%d written, %d rejected\n", written, bad)
	if bad > 0 {
		return fmt.Errorf("%d line(s) rejected", bad)
	}
	return nil
}

// recordOf turns one input line into a record: the key as given, the value
// encoded with schema (or as is when schema is nil; null is a tombstone).
func recordOf(line []byte, schema *schemas.Schema) (*kgo.Record, error) {
	v, err := schemas.ParseJSON(line)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(`want an object {"key": ..., "value": ...}`)
	}
	for k := range obj {
		if k != "key" && k != "value" {
			return nil, fmt.Errorf("unknown member %q (want key and value)", k)
		}
	}
	key, ok := obj["key"].(string)
	if !ok {
		return nil, fmt.Errorf("key: want a string")
	}
	rec := &kgo.Record{Key: []byte(key)}
	value, present := obj["value"]
	switch {
	case !present:
		return nil, fmt.Errorf("value: missing (null writes a tombstone)")
	case value == nil:
		return rec, nil
	case schema == nil:
		if s, ok := value.(string); ok {
			rec.Value = []byte(s)
		} else if rec.Value, err = json.Marshal(value); err != nil {
			return nil, err
		}
		return rec, nil
	}
	if rec.Value, err = schemas.EncodeJSON(schema, value); err != nil {
		return nil, fmt.Errorf("value does not fit %s: %w", schema.Name, err)
	}
	return rec, nil
}
