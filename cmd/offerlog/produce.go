package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

func runProduce(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("produce", stderr).produces()
	f.brokers()
	raw := f.Bool("raw", false, "write each value as given (a JSON string's text, or the JSON), without a schema")
	keep := keepMembers{}
	f.BoolVar(&keep.partition, "keep-partition", false, "write each record to the partition its line names (what consume printed) instead of its key's")
	f.BoolVar(&keep.timestamp, "keep-timestamp", false, "give each record the timestamp its line names (what consume printed) instead of now")
	timeout := f.Duration("timeout", defaultTimeout, "how long to wait for the brokers, to find the topic, and for each write")
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
	if err := checkTopic(ctx, kafka, topic, *timeout); err != nil {
		return err
	}
	opts := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond), kgo.RecordDeliveryTimeout(*timeout)}
	if keep.partition {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kafka.Client(opts...)
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
		rec, err := recordOf(text, schema, keep)
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

// keepMembers says which of the members consume prints besides the key
// and the value a line's record keeps.
type keepMembers struct{ partition, timestamp bool }

// recordOf turns one input line into a record: the key as given, the value
// encoded with schema (or as is when schema is nil; null is a tombstone).
// It takes back what consume prints: the partition and the timestamp,
// kept when keep says so, else ignored; the offset, which the broker
// gives; the writer's schema, which must be the topic's; and a value
// consume could not decode, written back byte for byte (base64 when consume
// said so).
func recordOf(line []byte, schema *schemas.Schema, keep keepMembers) (*kgo.Record, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		if _, perr := schemas.ParseJSON(line); perr != nil {
			return nil, fmt.Errorf("not JSON: %w", perr)
		}
		return nil, fmt.Errorf(`want an object {"key": ..., "value": ...}`)
	}
	for k := range obj {
		if !slices.Contains(consumedMembers, k) {
			return nil, fmt.Errorf("unknown member %q (want key and value, and what consume prints: %s)", k, strings.Join(consumedMembers[2:], ", "))
		}
	}
	var c consumed
	for _, m := range []struct {
		name, want string
		into       any
	}{{"key", "a string", &c.Key}, {"partition", "an integer", &c.Partition}, {"timestamp", "a string", &c.Timestamp},
		{"schema", "a string", &c.Schema}, {"undecodable", "a string", &c.Undecodable}} {
		raw, ok := obj[m.name]
		if !ok && m.name != "key" {
			continue
		}
		if !ok || string(raw) == "null" || json.Unmarshal(raw, m.into) != nil {
			return nil, fmt.Errorf("%s: want %s", m.name, m.want)
		}
	}
	rec := &kgo.Record{Key: []byte(c.Key)}
	if keep.partition {
		if _, ok := obj["partition"]; !ok {
			return nil, fmt.Errorf("partition: missing (--keep-partition)")
		}
		rec.Partition = c.Partition
	}
	if keep.timestamp {
		ts, err := time.Parse(time.RFC3339Nano, c.Timestamp)
		if err != nil {
			return nil, fmt.Errorf("timestamp: want RFC 3339 (--keep-timestamp), got %q", c.Timestamp)
		}
		rec.Timestamp = ts
	}
	rawValue, present := obj["value"]
	if !present {
		return nil, fmt.Errorf("value: missing (null writes a tombstone)")
	}
	value, err := schemas.ParseJSON(rawValue)
	if err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	switch {
	case value == nil:
		return rec, nil
	case c.Undecodable != "":
		// consume showed the bytes as they were: write them back so.
		text, ok := value.(string)
		if !ok {
			return nil, fmt.Errorf("value: want the string consume printed for an undecodable value")
		}
		rec.Value = []byte(text)
		if strings.HasSuffix(c.Undecodable, base64Note) {
			if rec.Value, err = base64.StdEncoding.DecodeString(text); err != nil {
				return nil, fmt.Errorf("value: not the base64 consume printed: %w", err)
			}
		}
		return rec, nil
	case schema == nil:
		if s, ok := value.(string); ok {
			rec.Value = []byte(s)
		} else if rec.Value, err = json.Marshal(value); err != nil {
			return nil, err
		}
		return rec, nil
	}
	if c.Schema != "" && c.Schema != schema.Name {
		return nil, fmt.Errorf("schema: the value was written as %s; this topic takes %s", c.Schema, schema.Name)
	}
	if rec.Value, err = schemas.EncodeJSON(schema, value); err != nil {
		return nil, fmt.Errorf("value does not fit %s: %w", schema.Name, err)
	}
	return rec, nil
}
