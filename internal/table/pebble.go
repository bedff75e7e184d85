package table

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
)

// offsetKey is where a table group's store keeps the changelog offset it
// has read to (goka's place for it, so a store goka left is taken over).
const offsetKey = "__offset"

// cacheShares is how many stores' cache shares make the block cache all
// the stores of a process share: a hot store takes more than its share, an
// idle one less. (A cache per store, a few MiB, kept too few of the index
// and filter blocks every Get reads: 12 % of the pipeline's CPU re-read them
// from their files.)
const cacheShares = 64

var processCache struct {
	sync.Mutex
	cache *pebble.Cache
}

// sharedCache returns the process's block cache, made at the first call
// with size bytes; the process holds it to the end.
func sharedCache(size int64) *pebble.Cache {
	processCache.Lock()
	defer processCache.Unlock()
	if processCache.cache == nil {
		processCache.cache = pebble.NewCache(size)
	}
	return processCache.cache
}

// pebbleMemory shares a store's memory out: each of the two memtables
// (the one filling, the one flushing) takes three eighths (at least 1 MiB),
// the block cache the rest (at least 512 KiB). A processor's store is
// written to far more than it is read back from disk: larger memtables mean
// fewer flushes, and fewer level-0 tables for a Get to look into (measured:
// the pipeline's Gets cost 16 % of its CPU with memtables of a quarter
// each).
func pebbleMemory(mem int64) (cache, memtable int64) {
	return max(mem/4, 512<<10), max(mem*3/8, 1<<20)
}

// OpenPebble opens (or creates) a local store at path within mem bytes
// for its memtables and its share of the process's block cache, with bloom
// filters, with or without its write-ahead log: the goka tables have none
// (their changelog restores them); a store that is its own record of what
// it read (the timer service's) keeps it.
func OpenPebble(path string, mem int64, wal bool, log *slog.Logger) (*pebble.DB, error) {
	return openPebble(path, mem, 1, wal, log)
}

// openPebble opens a store that holds parts partitions, each with mem
// bytes: its memtables take the parts' shares together, and the process's
// block cache is sized from one part's share whoever opens first. (A view,
// one store of every partition, sized the shared cache from its whole
// share: eight times the cache, and the bench's RSS 40 % up.)
func openPebble(path string, mem int64, parts int, wal bool, log *slog.Logger) (*pebble.DB, error) {
	cacheSize, _ := pebbleMemory(mem)
	_, memtable := pebbleMemory(mem * int64(max(parts, 1)))
	cache := sharedCache(cacheSize * cacheShares)
	opts := &pebble.Options{
		DisableWAL:                  !wal,
		Cache:                       cache,
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
