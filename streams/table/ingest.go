package table

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/offerlog/offerlog/streams"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A restore of at least ingestAtLeast records (a table partition onto an
// empty disk, a standby's first copy, a view onto an empty disk) writes
// them as sorted tables that the store ingests whole, ingestChunk bytes of
// records at a time, instead of key by key through the memtables: a
// store's memtables are a quarter of its share of the budget, and flushing
// and compacting them one by one held a restore to 25 MB/s of changelog at
// 5 M offers (issue 49).
const (
	ingestAtLeast = 50_000
	ingestChunk   = 64 << 20
)

// sortedIngest is one restore as sorted tables: the partitions of topic
// from their offsets from to end into db.
type sortedIngest struct {
	cluster *streams.Cluster
	db      *pebble.DB
	dir     string // the restore's own directory of table files
	topic   string
	from    map[int32]int64
	end     map[int32]int64
	chunk   int64 // 0: ingestChunk
	seen    func(r *kgo.Record)
	// done writes to b, committed with it after each chunk's tables are
	// ingested, what the store must say it holds: last is the last offset
	// read of each partition (end-1 at the end).
	done func(b *pebble.Batch, last map[int32]int64) error
	// committed, if set, is told last once b is committed.
	committed func(last map[int32]int64)
	// progress, if set, is told after every chunk but the last the share
	// of the records read, how many, and the changelog's MB/s.
	progress func(done float64, n int64, mbs float64)
}

// ingestSorted carries out in: a chunk's records are kept by key (the last
// of a key wins, a tombstone a deletion; a key is in one partition of a
// topic), written sorted to a table file and ingested, then done's writes
// are committed. A restore cut short resumes from what done wrote, and a
// chunk ingested again changes nothing. It returns how many records it
// read.
func ingestSorted(ctx context.Context, in sortedIngest) (int64, error) {
	// Emptied first: one a killed restore left.
	if err := errors.Join(os.RemoveAll(in.dir), os.MkdirAll(in.dir, 0o755)); err != nil {
		return 0, err
	}
	defer os.RemoveAll(in.dir)
	opts := (&pebble.Options{Levels: make([]pebble.LevelOptions, 7)}).EnsureDefaults()
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy, opts.Levels[i].FilterType = bloom.FilterPolicy(10), pebble.TableFilter
	}
	wo := opts.MakeWriterOptions(6, in.db.FormatMajorVersion().MaxTableFormat())
	values := map[string][]byte{}
	last := make(map[int32]int64, len(in.from))
	var total int64
	for p, from := range in.from {
		last[p] = from - 1
		total += in.end[p] - from
	}
	var size, n, read int64
	var tables int
	started := time.Now()
	flush := func(final bool) error {
		if len(values) > 0 {
			path := filepath.Join(in.dir, fmt.Sprintf("%06d.sst", tables))
			tables++
			f, err := vfs.Default.Create(path)
			if err != nil {
				return err
			}
			w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo)
			for _, k := range slices.Sorted(maps.Keys(values)) {
				if v := values[k]; v == nil {
					err = w.Delete([]byte(k))
				} else {
					err = w.Set([]byte(k), v)
				}
				if err != nil {
					_ = w.Close()
					return err
				}
			}
			if err := w.Close(); err != nil {
				return err
			}
			if err := in.db.Ingest([]string{path}); err != nil {
				return fmt.Errorf("ingest a table of %d records: %w", len(values), err)
			}
		}
		b := in.db.NewBatch()
		defer b.Close()
		if err := in.done(b, last); err != nil {
			return err
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		if in.committed != nil {
			in.committed(last)
		}
		if !final && in.progress != nil && total > 0 {
			in.progress(float64(n)/float64(total), n, float64(read)/1e6/time.Since(started).Seconds())
		}
		clear(values)
		size = 0
		return nil
	}
	var failed error
	err := streams.ReadRange(ctx, in.cluster, in.topic, in.from, in.end, func(r *kgo.Record) {
		if failed != nil {
			return
		}
		// A chunk ends at ingestChunk bytes read, not kept: the values
		// kept hold their fetches' buffers, and a changelog of many
		// writes of few keys would otherwise hold many times the chunk.
		k := string(r.Key)
		values[k] = r.Value
		size += int64(len(k) + len(r.Value))
		read += int64(len(k) + len(r.Value))
		if in.seen != nil {
			in.seen(r)
		}
		last[r.Partition], n = r.Offset, n+1
		if size >= cmp.Or(in.chunk, ingestChunk) {
			failed = flush(false)
		}
	})
	if err = errors.Join(err, failed); err != nil {
		return n, err
	}
	// Everything below the ends is in the store now, or gone from the
	// topic (compaction).
	for p, end := range in.end {
		last[p] = end - 1
	}
	return n, flush(true)
}
