package serving

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/streams"
)

// Source is what a cache server materialises a shard from
// (ServerConfig.Source): a compacted topic (TopicSource, the default) or
// any other store a service has. Its keys are cut into partitions, as a
// topic's are: a shard by ranges holds a range of them, a shard of a hash
// range (ServerConfig.Virtual) reads every partition and keeps its own
// keys.
type Source interface {
	// Partitions is how many partitions the source's keys are cut into.
	Partitions(ctx context.Context) (int32, error)
	// Sync calls apply with every entry of partitions lo to hi-1 as they
	// are now (a nil Value: the key has none), then loaded with the
	// position it loaded to (each partition's next offset; nil for a
	// source without positions): the shard answers from then on. It then
	// applies every later change until ctx ends, and returns nil then, or
	// fails (an error of apply's among them: the shard's store failed). apply may be called concurrently (by a goroutine per
	// partition); it must not be called once Sync returned. loaded may be
	// called again, with positions reached since (the source read past
	// what holds no entry).
	Sync(ctx context.Context, lo, hi int32, apply func([]Entry) error, loaded func(next map[int32]int64)) error
}

// Sizer is a Source that knows about how many entries partitions lo to
// hi-1 hold: the server sizes its store for them.
type Sizer interface {
	Size(ctx context.Context, lo, hi int32) int64
}

// Entry is a key's value (nil: none) from a Source, at its position
// (Offset -1: a source without positions, which GetAfter cannot wait for).
type Entry struct {
	Key       string
	Value     []byte
	Partition int32
	Offset    int64
}

// TopicSource is a compacted topic of a cluster as a Source: a shard is
// loaded to the partitions' end offsets found when it starts, then follows
// them through the one consume loop (named Name).
type TopicSource struct {
	Cluster *streams.Cluster
	Topic   string
	Name    string
	Logger  *slog.Logger
}

// Partitions implements Source.
func (t TopicSource) Partitions(ctx context.Context) (int32, error) {
	n, err := streams.PartitionsOf(ctx, t.Cluster.Admin(), t.Topic)
	if err != nil {
		return 0, fmt.Errorf("serving: partitions of %s: %w", t.Topic, err)
	}
	return n, nil
}

// Size implements Sizer: the records between the partitions' start and
// end offsets (a compacted log holds at most about twice its live keys).
func (t TopicSource) Size(ctx context.Context, lo, hi int32) int64 {
	adm := t.Cluster.Admin()
	starts, err := adm.ListStartOffsets(ctx, t.Topic)
	if err != nil {
		return 0
	}
	ends, err := adm.ListEndOffsets(ctx, t.Topic)
	if err != nil {
		return 0
	}
	var n int64
	for p := lo; p < hi; p++ {
		first, ok1 := starts.Lookup(t.Topic, p)
		end, ok2 := ends.Lookup(t.Topic, p)
		if ok1 && ok2 && first.Err == nil && end.Err == nil {
			n += end.Offset - first.Offset
		}
	}
	return n
}

// Sync implements Source: the topic up to the end offsets it finds
// (decided by offsets), then what follows them.
func (t TopicSource) Sync(ctx context.Context, lo, hi int32, apply func([]Entry) error, loaded func(next map[int32]int64)) error {
	endsOf, err := t.Cluster.Admin().ListEndOffsets(ctx, t.Topic)
	if err == nil {
		err = endsOf.Error()
	}
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", t.Topic, err)
	}
	ends := map[int32]int64{}
	follow := map[string]map[int32]kgo.Offset{t.Topic: {}}
	for p := lo; p < hi; p++ {
		o, _ := endsOf.Lookup(t.Topic, p)
		ends[p] = o.Offset
		follow[t.Topic][p] = kgo.NewOffset().At(o.Offset)
	}
	var one [1]Entry
	var applyErr error
	rctx, cancel := context.WithCancel(ctx)
	err = streams.ReadRange(rctx, t.Cluster, t.Topic, nil, ends, func(r *kgo.Record) {
		one[0] = entryOf(r)
		if err := apply(one[:]); err != nil && applyErr == nil {
			applyErr = err
			cancel()
		}
	})
	cancel()
	if applyErr != nil {
		return applyErr
	}
	if err != nil {
		return err
	}
	// Compaction may have removed the last records before the end offsets
	// read: the shard holds everything before them.
	loaded(ends)
	// A goroutine per partition: each batch its own entries. Reached
	// moves the shard past what holds no entry (a transaction's commit
	// marker, the last offset of a table group's batch).
	return streams.RunLoop(ctx, streams.LoopConfig{Name: t.Name, Cluster: t.Cluster, Partitions: follow, Logger: t.Logger,
		Reached: func(_ string, p int32, next int64) { loaded(map[int32]int64{p: next}) },
		BatchHandler: func(_ context.Context, b *streams.Batch) error {
			es := make([]Entry, len(b.Records))
			for i, r := range b.Records {
				es[i] = entryOf(r)
			}
			return streams.Fatal(apply(es))
		}})
}

func entryOf(r *kgo.Record) Entry {
	return Entry{Key: string(r.Key), Value: r.Value, Partition: r.Partition, Offset: r.Offset}
}

// Typed is a Client of typed keys and values: the seed's request
// description for a cache any service can use. Key writes a key as the
// string the cache holds it under (which is also what shards it), Decode
// reads a value the source wrote.
type Typed[K comparable, V any] struct {
	Client *Client
	Key    func(K) string
	Decode func([]byte) (V, error)
}

// Get returns the values of the keys found (Client.Get), decoded; a value
// that does not decode is an error naming its key.
func (t Typed[K, V]) Get(ctx context.Context, keys ...K) (map[K]V, error) {
	names := make([]string, len(keys))
	byName := make(map[string]K, len(keys))
	for i, k := range keys {
		names[i] = t.Key(k)
		byName[names[i]] = k
	}
	raw, err := t.Client.Get(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make(map[K]V, len(raw))
	for name, data := range raw {
		if data == nil {
			continue
		}
		v, err := t.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("serving: the value of %q: %w", name, err)
		}
		out[byName[name]] = v
	}
	return out, nil
}
