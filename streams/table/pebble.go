package table

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
)

// offsetKey is where a table group's store keeps the changelog offset it
// has read to (goka's place for it, so a store goka left is taken over).
const offsetKey = "__offset"

// BlockCache is the block cache the local stores of a process share (a
// hot store takes more than its share, an idle one less): made by the
// process, carried by its Config, closed by it. (A cache per store, a few
// MiB, kept too few of the index and filter blocks every Get reads: 12 %
// of the pipeline's CPU re-read them from their files.) Its memory goes
// when it is closed and its last store too: a process that runs its
// components one after another (make bench) makes one per run. (Until
// 2026-11-29 it was a variable of the package's, shared by every store of
// the process whatever its Config.)
type BlockCache struct{ c *pebble.Cache }

// NewBlockCache returns a block cache of size bytes.
func NewBlockCache(size int64) *BlockCache { return &BlockCache{c: pebble.NewCache(size)} }

// Close gives back the process's hold on the cache; the stores still open
// on it keep theirs until they close.
func (b *BlockCache) Close() { b.c.Unref() }

// pebbleMemory shares a store's memory out: each of the two memtables
// (the one filling, the one flushing) takes a quarter (at least 1 MiB),
// the block cache the rest (at least 512 KiB). Until 2026-11-27 the
// memtables took three eighths each and the cache a quarter, and the
// process's cache was 64 stores' quarters whatever their number: at 1 M
// offers (80 store partitions, a cache of 107 MiB of a 1 GiB budget) the
// API view's Gets allocated 5.8 GiB reading blocks from their files again,
// 4.1 GiB of it filter blocks. With the cache what the memtables leave of
// the stores' half (table.CacheMemoryOf: 244 MiB), 0.4 GiB; writes 3.4 ->
// 4.4 k/s, reads by id 10.2 -> 16.7 k/s (docs/BENCHMARKS.md, issue 36,
// sixth round). (Three eighths were chosen when the pipeline's Gets cost
// 16 % of its CPU with memtables of a quarter and the smaller cache; with
// this split the pipeline went from 0.55 to 0.64× goka, and the
// numerator's 1 M keys were as fast with either split.)
func pebbleMemory(mem int64) (cache, memtable int64) {
	memtable = max(mem/4, 1<<20)
	return max(mem-2*memtable, 512<<10), memtable
}

// OpenPebble opens (or creates) a local store at path within mem bytes
// for its memtables and its share of cache, the process's block cache (nil:
// a cache of its own, of its share), with bloom filters, with or without
// its write-ahead log: the goka tables have none (their changelog restores
// them); a store that is its own record of what it read (the timer
// service's) keeps it.
func OpenPebble(path string, mem int64, cache *BlockCache, wal bool, log *slog.Logger) (*pebble.DB, error) {
	return openPebble(path, mem, cache, 1, wal, log)
}

// openPebble opens a store that holds parts partitions, each with mem
// bytes: its memtables take the parts' shares together. (A view, one store
// of every partition, sized the shared cache from its whole share: eight
// times the cache, and the bench's RSS 40 % up.)
func openPebble(path string, mem int64, cache *BlockCache, parts int, wal bool, log *slog.Logger) (*pebble.DB, error) {
	share, memtable := pebbleMemory(mem * int64(max(parts, 1)))
	if cache == nil {
		// Opened with the store's reference, Unref'd here: the store's
		// Close frees it.
		own := pebble.NewCache(share)
		defer own.Unref()
		cache = &BlockCache{c: own}
	}
	opts := &pebble.Options{
		DisableWAL:                  !wal,
		Cache:                       cache.c,
		MemTableSize:                uint64(memtable),
		MemTableStopWritesThreshold: 2,
		Logger:                      pebbleLogger{log},
	}
	// Bloom filters: most Gets of a processor ask for a key the table does
	// not hold yet (a new document, a new offer); without a filter each
	// reads blocks of every level to find nothing (17 % of the document
	// pipeline's CPU, measured).
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble store %s: %w", path, err)
	}
	return db, nil
}

// pebbleLogger sends Pebble's log lines to slog at debug level.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log != nil {
		l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
