package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EndOffsets returns the end offset of every partition of topic, retrying
// while the topic is too new to be known to every broker (retriable errors)
// until ctx ends. A topic that does not exist is an error at once.
func EndOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			if len(out) > 0 {
				return out, nil
			}
			err = kerr.UnknownTopicOrPartition
		}
		if !kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("end offsets of %s: %w (%w)", topic, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ReadToEnd calls fn with every record of topic below its end offsets as of
// the call, in offset order per partition. It decides it is done by offsets
// alone, never by a silence: a partition is done once its read position
// reached the end offset listed at the start (transaction markers are read
// as the positions they take, and not passed to fn). It returns ctx's error
// if ctx ends first.
func ReadToEnd(ctx context.Context, c *Cluster, topic string, fn func(*kgo.Record)) error {
	ends, err := EndOffsets(ctx, c.Admin(), topic)
	if err != nil {
		return fmt.Errorf("read %s: %w", topic, err)
	}
	return ReadRange(ctx, c, topic, nil, ends, fn)
}

// ReadRange calls fn with the records of topic from the offsets from (the
// start of a partition when missing) up to, not including, the offsets ends
// (a partition not in ends is not read), in offset order per partition. Done
// is decided by offsets, as ReadToEnd does.
func ReadRange(ctx context.Context, c *Cluster, topic string, from, ends map[int32]int64, fn func(*kgo.Record)) error {
	want := map[int32]int64{}
	start := map[string]map[int32]kgo.Offset{topic: {}}
	for p, end := range ends {
		o := kgo.NewOffset().AtStart()
		if at, ok := from[p]; ok {
			if at >= end {
				continue
			}
			o = kgo.NewOffset().At(at)
		}
		if end > 0 {
			want[p] = end
			start[topic][p] = o
		}
	}
	if len(want) == 0 {
		return nil
	}
	// Committed records only: a transaction aborted (a numerator build
	// the coordinator refused) is not there for readers; one still open
	// is waited for.
	cl, err := c.Client(kgo.ConsumePartitions(start), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	// A partition whose records before its end are all gone (retention,
	// deleted records) is done at once: no fetch would bring it.
	starts, err := c.Admin().ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("read %s: %w", topic, err)
	}
	starts.Each(func(o kadm.ListedOffset) {
		if end, ok := want[o.Partition]; ok && o.Err == nil && o.Offset >= end {
			delete(want, o.Partition)
		}
	})
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %s: %w (still waiting for %v)", topic, ctx.Err(), want)
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			end, ok := want[p.Partition]
			if !ok {
				return
			}
			for _, r := range p.Records {
				if r.Offset >= end {
					break
				}
				if !r.Attrs.IsControl() {
					fn(r)
				}
			}
			// Everything below the log start offset is gone (retention,
			// compaction): a partition whose remaining records were all
			// removed is done too. Compaction never takes the record at
			// end-1 while it is a partition's last: Kafka does not clean
			// the active segment, and the embedded broker keeps a
			// partition's last batch as it is (kfake's compaction); once
			// records follow it, a fetch brings one at or past end.
			if n := len(p.Records); (n > 0 && p.Records[n-1].Offset >= end-1) || p.LogStartOffset >= end {
				delete(want, p.Partition)
			}
		})
	}
	return nil
}

// ReadLatest calls fn with the last record of every key of a compacted
// topic, as it is now, without holding the records in memory: it reads the
// topic twice, first each key's last offset (a tombstone removes the key),
// then the records at those offsets. It holds one offset per key.
func ReadLatest(ctx context.Context, c *Cluster, topic string, fn func(*kgo.Record)) error {
	ends, err := EndOffsets(ctx, c.Admin(), topic)
	if err != nil {
		return err
	}
	last := map[string]int64{} // key -> offset of its last record
	err = ReadRange(ctx, c, topic, nil, ends, func(r *kgo.Record) {
		if r.Value == nil {
			delete(last, string(r.Key))
			return
		}
		last[string(r.Key)] = r.Offset
	})
	if err != nil {
		return err
	}
	return ReadRange(ctx, c, topic, nil, ends, func(r *kgo.Record) {
		if at, ok := last[string(r.Key)]; ok && at == r.Offset {
			fn(r)
		}
	})
}

// Backlog returns how many records of topic group has not committed yet:
// over every partition, the end offset less the group's commit (or the
// log start offset, where the group has none or one before it).
func Backlog(ctx context.Context, adm *kadm.Client, group, topic string) (int64, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("backlog of %s on %s: %w", group, topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("backlog of %s on %s: %w", group, topic, err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) { // a group that never committed has it all to do
		return 0, fmt.Errorf("backlog of %s on %s: %w", group, topic, err)
	}
	var n int64
	ends.Each(func(end kadm.ListedOffset) {
		from := int64(0)
		if s, ok := starts.Lookup(topic, end.Partition); ok {
			from = s.Offset
		}
		if c, ok := committed.Lookup(topic, end.Partition); ok && c.Err == nil && c.At > from {
			from = c.At
		}
		n += max(0, end.Offset-from)
	})
	return n, nil
}

// PartitionsOf returns how many partitions topic has, asked through adm.
func PartitionsOf(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	ends, err := EndOffsets(ctx, adm, topic)
	if err != nil {
		return 0, err
	}
	return int32(len(ends)), nil
}

// WaitCommitted polls the group's committed offsets until every partition of
// ends is committed at or past its end offset. It returns nil then, or ctx's
// error.
func WaitCommitted(ctx context.Context, adm *kadm.Client, group string, ends kadm.Offsets) error {
	for {
		committed, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			done := true
			ends.Each(func(o kadm.Offset) {
				if o.At <= 0 {
					return
				}
				c, ok := committed.Lookup(o.Topic, o.Partition)
				if !ok || c.Err != nil || c.At < o.At {
					done = false
				}
			})
			if done {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
