package serving

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble"

	"github.com/offerlog/offerlog/streams/table"
)

// store is a shard's keys and values: in memory (slabStore) or on disk
// (diskStore, ServerConfig.Dir). The server holds its lock around it.
type store interface {
	// Get returns key's value and whether the store holds it; an error
	// is a store that could not be read (a disk's), never "not found".
	Get(key string) ([]byte, bool, error)
	Set(key string, value []byte) error
	Delete(key string) error
	Len() int
	Close() error
}

// diskStore is a shard's keys and values in a Pebble store of its own on
// disk, for a table read too rarely, and too large, to hold in memory (the
// archive of offers: 180 M a year by the seed): its values are not in the
// heap, only Pebble's small cache and memtables are. It is made anew for
// each shard held (the directory emptied), and loaded from the source as a
// memory store is.
type diskStore struct {
	db   *pebble.DB
	live int
}

// diskMemory bounds a disk store's memory: two memtables of a quarter,
// the block cache the rest (table.OpenPebble).
const diskMemory = 32 << 20

// newDiskStore empties dir and opens a store there, as the table
// runtime's stores are (bloom filters: a key the archive does not hold is
// answered without reading its blocks; no write-ahead log: the topic
// loads it again).
func newDiskStore(dir string, log *slog.Logger) (*diskStore, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("serving: empty %s: %w", dir, err)
	}
	db, err := table.OpenPebble(dir, diskMemory, nil, false, log)
	if err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	return &diskStore{db: db}, nil
}

// get returns a copy of key's value. Only Pebble's ErrNotFound is "not
// held": any other error (a corrupt or unreadable table file) is the
// store's, which the server answers as such; taken for a missing key, it
// made the cache answer "no such offer" for an archived one.
func (d *diskStore) get(key []byte) ([]byte, bool, error) {
	v, closer, err := d.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("serving: read the disk store: %w", err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), true, nil
}

// has reports whether the store holds key, without copying its value
// (Set and Delete ask it of every record a shard loads).
func (d *diskStore) has(key []byte) (bool, error) {
	_, closer, err := d.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("serving: read the disk store: %w", err)
	}
	return true, closer.Close()
}

// Get returns a copy of key's value.
func (d *diskStore) Get(key string) ([]byte, bool, error) { return d.get([]byte(key)) }

// Set sets key's value (a copy).
func (d *diskStore) Set(key string, value []byte) error {
	k := []byte(key)
	held, err := d.has(k)
	if err != nil {
		return err
	}
	if err := d.db.Set(k, value, pebble.NoSync); err != nil {
		return err
	}
	if !held {
		d.live++
	}
	return nil
}

// Delete removes key.
func (d *diskStore) Delete(key string) error {
	k := []byte(key)
	held, err := d.has(k)
	if err != nil || !held {
		return err
	}
	if err := d.db.Delete(k, pebble.NoSync); err != nil {
		return err
	}
	d.live--
	return nil
}

// Len returns how many keys the store holds.
func (d *diskStore) Len() int { return d.live }

// Close closes the store (its files stay until the next shard's store
// empties the directory).
func (d *diskStore) Close() error { return d.db.Close() }

// Close implements store: a memory store holds nothing to release.
func (s *slabStore) Close() error { return nil }
