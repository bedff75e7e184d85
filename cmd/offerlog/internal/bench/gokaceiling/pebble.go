package gokaceiling

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/lovoo/goka/storage"

	"github.com/offerlog/offerlog/streams/table"
)

// offsetKey is where goka keeps the changelog offset a store has read to,
// in the store itself (as goka's LevelDB storage does).
const offsetKey = "__offset"

// A goka storage on Pebble, without its write-ahead log.
//
// The changelog, not the local store, makes a table durable; LevelDB (goka's
// default) writes its own journal as well, a write call per Set: a tenth of
// the document pipeline's CPU (docs/BENCHMARKS.md). Pebble with the WAL off
// keeps writes in memory until a memtable flush. A process killed before a
// flush comes back with a prefix of what it wrote, its stored changelog
// offset among it (the offset is written after the values it covers), and
// goka restores the rest from the changelog, as it does for a new store.

// PebbleBuilder returns a goka storage builder of Pebble stores under dir,
// one per topic and partition, each with mem bytes for its block cache and
// memtables.
func PebbleBuilder(dir string, mem int64, log *slog.Logger) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		return openPebble(filepath.Join(dir, fmt.Sprintf("%s.%d", topic, partition)), mem, log)
	}
}

type pebbleStore struct {
	db *pebble.DB

	// The changelog offset the store holds, and how many were set since
	// it was last written (see SetOffset).
	mu      sync.Mutex
	offset  int64
	set     bool
	pending int
}

// offsetEvery is how many offsets SetOffset takes before it writes one.
const offsetEvery = 256

func openPebble(path string, mem int64, log *slog.Logger) (*pebbleStore, error) {
	db, err := table.OpenPebble(path, mem, nil, false, log)
	if err != nil {
		return nil, err
	}
	return &pebbleStore{db: db}, nil
}

func (s *pebbleStore) Open() error { return nil }

// Close writes the offset, flushes the memtables (without a WAL they would
// be lost) and closes the store.
func (s *pebbleStore) Close() error {
	return errors.Join(s.writeOffset(), s.db.Flush(), s.db.Close())
}

func (s *pebbleStore) Has(key string) (bool, error) {
	v, err := s.Get(key)
	return v != nil, err
}

func (s *pebbleStore) Get(key string) ([]byte, error) {
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pebble get %q: %w", key, err)
	}
	defer closer.Close()
	out := make([]byte, len(v))
	copy(out, v)
	return out, nil
}

func (s *pebbleStore) Set(key string, value []byte) error {
	return s.db.Set([]byte(key), value, pebble.NoSync)
}

func (s *pebbleStore) Delete(key string) error {
	return s.db.Delete([]byte(key), pebble.NoSync)
}

func (s *pebbleStore) GetOffset(def int64) (int64, error) {
	s.mu.Lock()
	offset, set := s.offset, s.set
	s.mu.Unlock()
	if set {
		return offset, nil
	}
	v, err := s.Get(offsetKey)
	if err != nil || v == nil {
		return def, err
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("pebble store offset %q: %w", v, err)
	}
	return n, nil
}

// SetOffset records the changelog offset the store holds; goka calls it
// after every value. It writes it to the store once every offsetEvery
// calls (and on MarkRecovered and Close): a Set per value put an offset
// between every two values in the memtables (5 % of the numerator's CPU,
// and half of its memtable inserts). The offset written is never ahead of
// the values written before it, the order a flush keeps: a store killed
// before a flush comes back with an offset at most that far behind its
// values, and goka reads the changelog again from there, writing the same
// values again.
func (s *pebbleStore) SetOffset(offset int64) error {
	s.mu.Lock()
	s.offset, s.set = offset, true
	s.pending++
	due := s.pending >= offsetEvery
	s.mu.Unlock()
	if !due {
		return nil
	}
	return s.writeOffset()
}

// writeOffset writes the last offset set, if any was set since the last
// write.
func (s *pebbleStore) writeOffset() error {
	s.mu.Lock()
	offset, pending := s.offset, s.pending
	s.pending = 0
	s.mu.Unlock()
	if pending == 0 {
		return nil
	}
	return s.Set(offsetKey, []byte(strconv.FormatInt(offset, 10)))
}

// MarkRecovered writes the offset and flushes what the recovery wrote, so
// that a restart does not read it from the changelog again.
func (s *pebbleStore) MarkRecovered() error {
	return errors.Join(s.writeOffset(), s.db.Flush())
}

func (s *pebbleStore) Iterator() (storage.Iterator, error) { return s.IteratorWithRange(nil, nil) }

func (s *pebbleStore) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: limit})
	if err != nil {
		return nil, err
	}
	return &pebbleIterator{it: it}, nil
}

// pebbleIterator is goka's iterator over a Pebble iterator: Next moves to
// the first pair at its first call, and the offset key is skipped.
type pebbleIterator struct {
	it      *pebble.Iterator
	started bool
}

func (i *pebbleIterator) Next() bool {
	var ok bool
	if !i.started {
		i.started, ok = true, i.it.First()
	} else {
		ok = i.it.Next()
	}
	for ok && string(i.it.Key()) == offsetKey {
		ok = i.it.Next()
	}
	return ok
}

func (i *pebbleIterator) Err() error             { return i.it.Error() }
func (i *pebbleIterator) Key() []byte            { return i.it.Key() }
func (i *pebbleIterator) Value() ([]byte, error) { return i.it.Value(), nil }
func (i *pebbleIterator) Release()               { _ = i.it.Close() }

// Seek positions the iterator before the first pair at or after key: the
// next Next returns it.
func (i *pebbleIterator) Seek(key []byte) bool {
	ok := i.it.SeekGE(key)
	for ok && string(i.it.Key()) == offsetKey {
		ok = i.it.Next()
	}
	if ok {
		// Next advances first: step back so that it lands here.
		i.started = true
		if !i.it.Prev() {
			i.started = false
		}
	}
	return ok
}
