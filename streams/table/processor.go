package table

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/topics"
)

// A Graph is a processor group written in goka's model: the group, the
// codec of its table's values, its inputs with their callbacks and the
// outputs the callbacks emit to. Its table is the topic GroupTable(Group),
// keyed as the inputs and co-partitioned with them.
//
// A Graph runs on the table runtime (Group): each input partition's records
// waiting for its worker are one batch, whose keys are read from the local
// store through one iterator; the callback runs once per record, in offset
// order, against the batch's view of the table (what the records before it
// set included); each key a batch changed is written once, with the batch's
// outputs, when the batch commits. Tester runs the same callbacks without a
// broker.
type Graph struct {
	Group string
	// Codec of the table's values.
	Codec streams.Codec
	// Inputs are the topics the group consumes, with their callbacks.
	Inputs []Input
	// Outputs are the topics the callbacks may emit to, with the codecs of
	// their values.
	Outputs []Output
	// DeadTopic receives the records a callback fails on (an emit that does
	// not encode, a panic) once retries are spent, as the Loop's does.
	DeadTopic string
}

// Input is an input topic of a Graph and the callback of its records.
type Input struct {
	Topic    string
	Callback Callback
}

// Output is a topic a Graph's callbacks emit to and the codec of its
// values.
type Output struct {
	Topic string
	Codec streams.Codec
}

// A Callback handles one input record, msg its value (nil for a record
// without one), as a goka callback does.
type Callback func(ctx Context, msg []byte)

// Context is what a callback is handed for one input record: where the
// record is, its key's value in the group table, and the writes it makes.
// It is goka's Context, less the lookups offerlog does not use, plus
// AfterCommit.
type Context interface {
	// Group is the group the callback runs in.
	Group() string
	Topic() string
	Partition() int32
	Offset() int64
	// Timestamp is the input record's.
	Timestamp() time.Time
	Key() string
	Headers() []kgo.RecordHeader
	// Value is the key's value in the table (decoded by the group's codec),
	// nil if it has none. Each call decodes anew: a value changed in place
	// is not written unless set.
	Value() any
	// SetValue sets the key's value; the table holds it once the batch
	// commits. It is encoded at the call.
	SetValue(value any)
	// Delete removes the key's value.
	Delete()
	// Emit writes value (nil: a tombstone) under key to topic, one of the
	// group's outputs, with the batch, to the partition the key hashes to.
	Emit(topic, key string, value any)
	// AfterCommit calls fn once the batch is committed: its table values,
	// outputs and mark acknowledged. A process hands answers over to its
	// own waiters this way, as durable as the copy read from the topic.
	// A batch that fails never calls it.
	AfterCommit(fn func())
}

// GroupTable returns the table topic of group (goka's naming).
func GroupTable(group string) topics.Table { return topics.Table(group + "-table") }

// Table is the group's table topic.
func (g *Graph) Table() topics.Table { return GroupTable(g.Group) }

// InputTopics returns the topics of g's inputs.
func (g *Graph) InputTopics() []string {
	out := make([]string, len(g.Inputs))
	for i, in := range g.Inputs {
		out[i] = in.Topic
	}
	return out
}

// OutputTopics returns the topics of g's outputs.
func (g *Graph) OutputTopics() []string {
	out := make([]string, len(g.Outputs))
	for i, o := range g.Outputs {
		out[i] = o.Topic
	}
	return out
}

// TableGroup returns the table group that runs g with s, calling onReady
// (if set) once its first assignment has read its changelogs.
func (g *Graph) TableGroup(s Config, onReady func()) *Group {
	return &Group{Streams: s, Name: g.Group, Table: g.Table(), Inputs: g.InputTopics(), Outputs: g.OutputTopics(),
		DeadTopic: g.DeadTopic, Handle: func(_ context.Context, b BatchTable) error { return g.Process(b, b.Input()) },
		OnReady: onReady, Logger: s.Logger}
}

// Run runs g until ctx is done (Group.Run).
func (g *Graph) Run(ctx context.Context, s Config, onReady func()) error {
	if err := g.TableGroup(s, onReady).Run(ctx); err != nil {
		return fmt.Errorf("%s: %w", g.Group, err)
	}
	return nil
}

// Replay rebuilds g's table (and, as s.Replaying says, its outputs) from
// its inputs (Replay): tableConfigs are the configs its table topic is
// recreated with. The group must not be running.
func (g *Graph) Replay(ctx context.Context, s Config, tableConfigs map[string]string, partitions int32, replication int16) error {
	spec := replay.Spec{Group: g.Group, Inputs: g.InputTopics(), Table: g.Table(), TableConfigs: tableConfigs,
		Partitions: partitions, Replication: replication}
	return Replay(ctx, s, spec, func(ctx context.Context, s Config) error { return g.Run(ctx, s, nil) })
}

// BatchTable is what a table group's handler (and a Graph's callbacks)
// is handed: one input partition's batch and the table it reads and
// writes, an Update on the broker or a Tester's table in memory.
type BatchTable interface {
	// Input is the batch of input records.
	Input() *streams.Batch
	// Names are the group's and its table's.
	Names() (group, table string)
	// Values returns the current value of each of keys that has one.
	Values(keys []string) (map[string][]byte, error)
	// Set sets key's value (nil deletes it) when the batch commits.
	Set(key string, value []byte)
	// Emit writes out, an output of in, when the batch commits.
	Emit(in, out *kgo.Record)
	// AfterCommit calls fn once the batch has committed.
	AfterCommit(fn func())
}

// Process runs the callbacks of b's records against t, in order. It
// returns the first error of a callback (an emit to a topic that is not an
// output, a value that does not encode, a panic): nothing of the batch is
// kept then.
func (g *Graph) Process(t BatchTable, b *streams.Batch) (err error) {
	i := slices.IndexFunc(g.Inputs, func(in Input) bool { return in.Topic == b.Topic })
	if i < 0 {
		return streams.Fatal(fmt.Errorf("%s: %s is not one of its inputs", g.Group, b.Topic))
	}
	cb := g.Inputs[i].Callback
	keys := make([]string, len(b.Records))
	for i, r := range b.Records {
		keys[i] = string(r.Key)
	}
	values, err := t.Values(keys)
	if err != nil {
		return err
	}
	c := &callContext{g: g, t: t, values: values}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: the callback of %s[%d] at offset %d panicked: %v", g.Group, c.r.Topic, c.r.Partition, c.r.Offset, p)
		}
	}()
	for _, r := range b.Records {
		c.r, c.key, c.decoded, c.value = r, string(r.Key), false, nil
		cb(c, r.Value)
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

func (g *Graph) output(topic string) (streams.Codec, bool) {
	for _, o := range g.Outputs {
		if o.Topic == topic {
			return o.Codec, true
		}
	}
	return nil, false
}

// callContext is the Context of one record of a batch.
type callContext struct {
	g      *Graph
	t      BatchTable
	values map[string][]byte // the batch's view of its keys' values
	r      *kgo.Record
	key    string // r's key, made once for the callback's calls of Key
	// value is r's key's value decoded, once decoded is set.
	decoded bool
	value   any
	err     error
	// outs and keys are where the batch's output records and their keys
	// are made, a block at a time (see record).
	outs []kgo.Record
	keys []byte
}

func (c *callContext) Group() string               { return c.g.Group }
func (c *callContext) Topic() string               { return c.r.Topic }
func (c *callContext) Partition() int32            { return c.r.Partition }
func (c *callContext) Offset() int64               { return c.r.Offset }
func (c *callContext) Timestamp() time.Time        { return c.r.Timestamp }
func (c *callContext) Key() string                 { return c.key }
func (c *callContext) Headers() []kgo.RecordHeader { return c.r.Headers }
func (c *callContext) AfterCommit(fn func())       { c.t.AfterCommit(fn) }

func (c *callContext) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *callContext) Value() any {
	if c.decoded {
		return c.value
	}
	c.decoded = true
	data := c.values[c.key]
	if data == nil {
		return nil
	}
	v, err := c.g.Codec.Decode(data)
	if err != nil {
		c.fail(fmt.Errorf("%s: decode the table value of %q: %w", c.g.Group, c.r.Key, err))
		return nil
	}
	c.value = v
	return v
}

func (c *callContext) SetValue(value any) {
	if value == nil {
		c.Delete()
		return
	}
	data, err := c.g.Codec.Encode(value)
	if err != nil {
		c.fail(fmt.Errorf("%s: encode the table value of %q: %w", c.g.Group, c.r.Key, err))
		return
	}
	c.set(data)
}

func (c *callContext) Delete() { c.set(nil) }

func (c *callContext) set(data []byte) {
	key := c.key
	c.values[key] = data
	c.decoded = false
	c.t.Set(key, data)
}

func (c *callContext) Emit(topic, key string, value any) {
	codec, ok := c.g.output(topic)
	if !ok {
		c.fail(streams.Fatal(fmt.Errorf("%s: an emit to %s, not one of its outputs", c.g.Group, topic)))
		return
	}
	var data []byte
	if value != nil {
		var err error
		if data, err = codec.Encode(value); err != nil {
			c.fail(fmt.Errorf("%s: encode a value for %s: %w", c.g.Group, topic, err))
			return
		}
	}
	c.t.Emit(c.r, c.record(topic, key, data))
}

// record returns a new output record, made in the batch's blocks: one
// allocation for 64 records and one for 4 KiB of keys, where each emit made
// two (the record, its key's copy): with the key strings, 27 % of the
// aggregate's allocations a command (BenchmarkCommands in
// processors/offers; docs/BENCHMARKS.md, issue 36, sixth round).
// Each key is cut to its length, so an append to it copies.
func (c *callContext) record(topic, key string, value []byte) *kgo.Record {
	if len(c.outs) == cap(c.outs) {
		c.outs = make([]kgo.Record, 0, 64)
	}
	if len(c.keys)+len(key) > cap(c.keys) {
		c.keys = make([]byte, 0, max(4<<10, len(key)))
	}
	from := len(c.keys)
	c.keys = append(c.keys, key...)
	c.outs = append(c.outs, kgo.Record{Topic: topic, Key: c.keys[from:len(c.keys):len(c.keys)], Value: value})
	return &c.outs[len(c.outs)-1]
}

// TableValue returns the value of the callback's key in its group table, nil
// if there is none. A value that does not decode is sent to dead as a dead
// letter of the table topic (key, bytes and reason; offset -1, for the
// batch does not say where it was) and taken as absent: the record is
// handled as one for a new key, and the value it sets replaces the garbage.
// Call it once per callback.
func TableValue[T any](ctx Context, dead string) *T {
	switch v := ctx.Value().(type) {
	case *T:
		return v
	case *streams.Undecodable:
		ctx.Emit(dead, ctx.Key(), streams.NewDeadLetter(ctx.Group(), string(GroupTable(ctx.Group())), ctx.Partition(), -1,
			[]byte(ctx.Key()), v.Data, ctx.Timestamp(), "undecodable table value, taken as absent: "+v.Err.Error()))
	}
	return nil
}

// Reassert sets v, the key's current value, again. A record handled again
// after a crash (between its batch's changelog and its mark) finds in the
// table what its first handling set; a callback that recognises such a
// record, and answers it from the value, reasserts the value, so that the
// batch that answers it again writes it with its new mark. Writing the
// current value again is harmless.
func Reassert[T any](ctx Context, v *T) {
	if v != nil {
		ctx.SetValue(v)
	}
}

// RememberWindow is how far back in its input partition a value that
// keeps a window of answers remembers them (RememberIn; the registry's
// verdicts, which the document API answers a message's verdict from):
// far more offsets back than a poll (10 000 records). What a value keeps
// is a function of the log alone, so a replay writes the same value.
const RememberWindow = 40_000

// Remembered bounds the answers a value keeps, should one key get more
// records than this within RememberWindow.
const Remembered = 256

// RememberIn returns recent with next appended, without the entries
// stale reports (answers to records of next's partition more than
// RememberWindow offsets before it), at most Remembered, the last. recent
// is not changed. The registry's verdicts' rule; the other groups keep one
// answer (Remember).
func RememberIn[T any](recent []T, next T, stale func(T) bool) []T {
	out := make([]T, 0, min(len(recent)+1, Remembered))
	for _, x := range recent {
		if !stale(x) {
			out = append(out, x)
		}
	}
	out = append(out, next)
	if len(out) > Remembered {
		out = slices.Clone(out[len(out)-Remembered:])
	}
	return out
}

// Stale reports whether a record at offset of a partition is more than
// RememberWindow offsets before newest, the offset of a record of the
// same partition.
func Stale(offset, newest int64) bool { return offset <= newest-RememberWindow }

// Remember returns what a value remembers of its answers: the answer r to
// the record at (r.Topic, r.Partition, r.Offset), alone. A callback that writes a value remembers in it the answer it
// gives, so that the answer to a record handled again after a crash
// (Recall) comes from, and is persisted with, the value: it is the answer
// given the first time.
//
// One answer is all a value ever needs. A batch's changelog records, its
// outputs and its mark are one transaction (Update.commit): the input
// handled again after a crash is that of batches the changelog holds
// nothing of, or of a batch that set no value, so a record recalled is
// its value's own or none of it. (Until 2026-12-03 a batch's changelog
// and outputs were two writes, and a batch held one record of each key so
// that a record recalled was its key's last.) The window of answers
// kept until 2026-11-28 (up to 256, RememberIn's rule) made a hot offer's
// value 7 KB after 300 writes, each rewritten into the store, the
// changelog, the views and the cache at every write.
func Remember(r schemas.RecentResult) []schemas.RecentResult {
	return []schemas.RecentResult{r}
}

// Recall returns the answer recent remembers for the record at (partition,
// offset), if the value was written by it: the record is handled again
// after a crash, and is to be answered as the first time, its value
// reasserted (Reassert).
func Recall(recent []schemas.RecentResult, partition int32, offset int64) (schemas.RecentResult, bool) {
	for _, r := range recent {
		if r.Partition == partition && r.Offset == offset {
			return r, true
		}
	}
	return schemas.RecentResult{}, false
}

// errNotRunning is what a view answers before Run opened it or after it
// returned.
var errNotRunning = errors.New("view is not running")
