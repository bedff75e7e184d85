package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
)

// deadLine is one line of `offerlog deadletters list`.
type deadLine struct {
	// Partition and Offset locate the dead letter in its dead-letter topic.
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Topic, SourcePartition and SourceOffset locate the original record.
	Topic           string `json:"topic"`
	SourcePartition int32  `json:"source_partition"`
	SourceOffset    int64  `json:"source_offset"`
	Key             string `json:"key"`
	Group           string `json:"group"`
	Reason          string `json:"reason"`
	ValueSize       int64  `json:"value_size"`
	ValueSHA256     string `json:"value_sha256"`
	// Complete says whether the whole record was kept (it can be re-driven).
	Complete  bool   `json:"complete"`
	Timestamp string `json:"timestamp"`
}

func runDeadLetters(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("deadletters", stderr).produces()
	f.brokers()
	offset := f.Int64("offset", -1, "redrive: only the dead letter at this offset of the dead-letter topic")
	partition := f.Int("partition", -1, "redrive: with --offset, the dead-letter topic's partition (needed when several hold the offset)")
	all := f.Bool("all", false, "redrive: every dead letter of the topic")
	if err := f.parse(args); err != nil {
		return err
	}
	kafka, err := f.cluster()
	if err != nil {
		return err
	}
	defer kafka.Close()
	if f.NArg() != 2 || (f.Arg(0) != "list" && f.Arg(0) != "redrive") {
		return fmt.Errorf("%w: want list or redrive, and the dead-letter TOPIC", errUsage)
	}
	verb, topic := f.Arg(0), f.Arg(1)
	if verb == "redrive" && (*offset < 0) == !*all {
		return fmt.Errorf("%w: redrive wants --offset N or --all", errUsage)
	}
	// A topic that does not exist has no end to read to: say so at once.
	if err := checkTopic(ctx, kafka, topic, defaultTimeout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	type letter struct {
		r *kgo.Record
		d schemas.DeadLetter
	}
	var letters []letter
	var bad []string
	err = streams.ReadToEnd(ctx, kafka, topic, func(r *kgo.Record) {
		var d schemas.DeadLetter
		if err := schemas.DeadLetters.Decode(r.Value, &d); err != nil {
			bad = append(bad, fmt.Sprintf("%d@%d: %v", r.Partition, r.Offset, err))
			return
		}
		letters = append(letters, letter{r, d})
	})
	if err != nil {
		return err
	}
	for _, b := range bad {
		fmt.Fprintf(stderr, "not a dead letter: %s\n", b)
	}
	if verb == "list" {
		enc := json.NewEncoder(stdout)
		for _, l := range letters {
			key := string(l.d.Key)
			if !utf8.Valid(l.d.Key) {
				key = hex.EncodeToString(l.d.Key)
			}
			if err := enc.Encode(deadLine{Partition: l.r.Partition, Offset: l.r.Offset, Topic: l.d.Topic,
				SourcePartition: l.d.Partition, SourceOffset: l.d.Offset, Key: key, Group: l.d.Group, Reason: l.d.Reason,
				ValueSize: l.d.ValueSize, ValueSHA256: hex.EncodeToString(l.d.ValueSHA256), Complete: l.d.Complete(),
				Timestamp: l.d.Timestamp.UTC().Format(time.RFC3339Nano)}); err != nil {
				return err
			}
		}
		return nil
	}
	var chosen []letter
	for _, l := range letters {
		if *all || (l.r.Offset == *offset && (*partition < 0 || l.r.Partition == int32(*partition))) {
			chosen = append(chosen, l)
		}
	}
	switch {
	case len(chosen) == 0 && *all:
		// Nothing to redrive is not a failure (it said "offset -1").
		fmt.Fprintf(stdout, "redriven 0 of 0 dead letters of %s: it holds none\n", topic)
		return nil
	case len(chosen) == 0:
		return fmt.Errorf("no dead letter at offset %d of %s", *offset, topic)
	case !*all && len(chosen) > 1:
		return fmt.Errorf("%d partitions of %s hold offset %d: say which with --partition", len(chosen), topic, *offset)
	}
	var recs []*kgo.Record
	var errs []error
	for _, l := range chosen {
		r, err := streams.RedriveRecord(&l.d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) > 0 {
		cl, err := kafka.Producer("deadletters", kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return err
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("redrive: %w", err)
		}
	}
	fmt.Fprintf(stdout, "redriven %d of %d dead letters of %s\n", len(recs), len(chosen), topic)
	return errors.Join(errs...)
}
