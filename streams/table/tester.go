package table

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/offerlog/offerlog/streams"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A Tester runs a table group's handler (a Graph's callbacks, or any
// Group's Handle: the registry's, the numerator's) without a broker,
// against a table in memory, as goka's tester does: each Consume is one
// batch, committed at once (AfterCommit's functions called) unless the
// handler failed. What the batch set is in the table after; what it
// emitted is returned. Not safe for concurrent use.
type Tester struct {
	group, name string
	outputs     []string
	handle      func(context.Context, BatchTable) error
	codec       streams.Codec
	table       map[string][]byte
	offset      map[string]map[int32]int64 // next offset by topic and partition
}

// NewTester returns a Tester of g with an empty table.
func NewTester(g *Graph) *Tester {
	return newTester(g.Group, string(g.Table()), g.OutputTopics(), g.Codec,
		func(_ context.Context, b BatchTable) error { return g.Process(b, b.Input()) })
}

// NewGroupTester returns a Tester of g's handler with an empty table whose
// values c decodes (Value).
func NewGroupTester(g *Group, c streams.Codec) *Tester {
	return newTester(g.Name, string(g.Table), g.Outputs, c, g.Handle)
}

func newTester(group, name string, outputs []string, c streams.Codec, handle func(context.Context, BatchTable) error) *Tester {
	return &Tester{group: group, name: name, outputs: outputs, handle: handle, codec: c, table: map[string][]byte{},
		offset: map[string]map[int32]int64{}}
}

// Record returns an input record of topic's partition at its next offset
// (offsets count per partition from 0), timestamped now.
func (t *Tester) Record(topic string, partition int32, key string, value []byte) *kgo.Record {
	if t.offset[topic] == nil {
		t.offset[topic] = map[int32]int64{}
	}
	o := t.offset[topic][partition]
	t.offset[topic][partition] = o + 1
	return &kgo.Record{Topic: topic, Partition: partition, Offset: o, Key: []byte(key), Value: value, Timestamp: time.Now()}
}

// Consume handles one record of topic's partition (Record) and returns its
// outputs.
func (t *Tester) Consume(topic string, partition int32, key string, value []byte) ([]*kgo.Record, error) {
	return t.ConsumeBatch(t.Record(topic, partition, key, value))
}

// ConsumeBatch handles records, one partition's, in order, as one batch:
// a record given again (its offset not new) is handled again, as after a
// crash. It returns the batch's outputs, or the error that failed it
// (nothing of the batch kept).
func (t *Tester) ConsumeBatch(records ...*kgo.Record) ([]*kgo.Record, error) {
	if len(records) == 0 {
		return nil, nil
	}
	b := &memBatch{t: t, in: &streams.Batch{Topic: records[0].Topic, Partition: records[0].Partition, Records: records},
		sets: map[string][]byte{}}
	if err := t.handle(context.Background(), b); err != nil {
		return nil, err
	}
	for _, r := range b.out {
		if !slices.Contains(t.outputs, r.Topic) {
			return nil, fmt.Errorf("%s: a write to %s, not one of its outputs", t.group, r.Topic)
		}
	}
	for k, v := range b.sets {
		if v == nil {
			delete(t.table, k)
		} else {
			t.table[k] = v
		}
	}
	for _, fn := range b.after {
		fn()
	}
	return b.out, nil
}

// Value returns key's value in the table, decoded, or nil.
func (t *Tester) Value(key string) any {
	data, ok := t.table[key]
	if !ok {
		return nil
	}
	v, err := t.codec.Decode(data)
	if err != nil {
		return err
	}
	return v
}

// SetValue writes data as key's value in the table (nil deletes it), as a
// changelog would hold it: garbage too.
func (t *Tester) SetValue(key string, data []byte) {
	if data == nil {
		delete(t.table, key)
		return
	}
	t.table[key] = bytes.Clone(data)
}

// Keys returns how many keys the table holds.
func (t *Tester) Keys() int { return len(t.table) }

// memBatch is a Tester's BatchTable.
type memBatch struct {
	t     *Tester
	in    *streams.Batch
	sets  map[string][]byte
	out   []*kgo.Record
	after []func()
}

func (b *memBatch) Values(keys []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(keys))
	for _, k := range keys {
		if v, ok := b.sets[k]; ok {
			if v != nil {
				out[k] = v
			}
		} else if v, ok := b.t.table[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func (b *memBatch) Input() *streams.Batch        { return b.in }
func (b *memBatch) Names() (group, table string) { return b.t.group, b.t.name }
func (b *memBatch) Set(key string, value []byte) { b.sets[key] = value }
func (b *memBatch) Emit(_, out *kgo.Record)      { b.out = append(b.out, out) }
func (b *memBatch) AfterCommit(fn func())        { b.after = append(b.after, fn) }
