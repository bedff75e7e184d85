package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadToEnd calls fn with every record of topic up to its end offsets as
// of the call, in offset order per partition. Offsets that hold no record
// (compacted away, transaction markers) are not waited for: reading ends
// once every partition reached its end offset, or idle passed without a
// record.
func ReadToEnd(ctx context.Context, brokers []string, topic string, idle time.Duration, fn func(*kgo.Record)) error {
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer adm.Close()
	var ends kadm.ListedOffsets
	for {
		ends, err = kadm.NewClient(adm).ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			break
		}
		// A topic created a moment ago may not be in the metadata yet.
		select {
		case <-ctx.Done():
			return fmt.Errorf("read %s: end offsets: %w", topic, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	want := map[int32]int64{}
	start := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(start))
	if err != nil {
		return err
	}
	defer cl.Close()
	last := time.Now()
	for len(want) > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("read %s: %w (still waiting for %v)", topic, ctx.Err(), want)
		}
		if fs.NumRecords() > 0 {
			last = time.Now()
		} else if time.Since(last) >= idle {
			return nil // idle: the rest holds no records
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			fn(r)
			if r.Offset == end-1 {
				delete(want, r.Partition)
			}
		})
	}
	return nil
}
