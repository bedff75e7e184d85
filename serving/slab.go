package serving

import (
	"encoding/binary"
	"hash/maphash"
)

// slabStore is a shard's keys and values, kept as records in large byte
// slabs with an open-addressing index of fixed-size slots, the way
// freecache and bigcache keep theirs: no Go pointer per entry, so the
// garbage collector neither scans nor counts the entries one by one, and
// an entry costs its bytes, an 8-byte header and an index slot (16 bytes,
// at most 4 in 3 of them used), not a map entry, a string and a slice of
// its own. A map[string][]byte of the records as fetched held 1 460–2 681
// bytes of heap per offer of ~606 bytes (issue 49).
//
// Slabs are written once, appended to, and never changed: a value handed
// out by Get stays valid however the store changes after (a slab no entry
// uses any more is dropped, and the garbage collector frees it once no
// answer holds a value of it). An update appends the new record and points
// the key's slot at it; the old record is dead bytes, and so is a deleted
// one. Once dead bytes are half of the slabs, a write first moves the live
// records of the oldest slabs to the end and drops them (reclaim), so the
// dead bytes stay under half.
//
// Not safe for concurrent use: the server holds its lock around it.
type slabStore struct {
	seed  maphash.Seed
	slots []slot // open addressing, linear probing; len a power of two
	used  int    // slots not empty (live and deleted)
	live  int    // keys held

	slabs    [][]byte // nil once dropped; a slot's slab is its index
	oldest   int      // the oldest slab not dropped
	bytes    int64    // records in the slabs, live and dead
	dead     int64    // records superseded or deleted
	slabSize int
}

// slot is an index entry: where a key's record is (slab+1 in the high 32
// bits, its offset in the low; 0 empty, deleted a key deleted), and the
// key's hash, to skip other keys' records and to grow without reading
// them.
type slot struct {
	at   uint64
	hash uint64
}

const (
	deleted uint64 = 1<<64 - 1
	// recordHeader is a record's key and value lengths.
	recordHeader = 8
	// defaultSlab is the size of a slab: large enough that the index of
	// slabs is small, small enough that moving one is a short pause.
	defaultSlab = 8 << 20
)

// newSlabStore returns a store sized for hint keys.
func newSlabStore(hint, slabSize int) *slabStore {
	n := 16
	for n*3 < hint*4 {
		n *= 2
	}
	if slabSize <= 0 {
		slabSize = defaultSlab
	}
	return &slabStore{seed: maphash.MakeSeed(), slots: make([]slot, n), slabSize: slabSize}
}

// Len returns how many keys the store holds.
func (s *slabStore) Len() int { return s.live }

// Bytes returns the bytes of the slabs, and of them those of records
// superseded or deleted.
func (s *slabStore) Bytes() (total, dead int64) { return s.bytes, s.dead }

// find returns the slot of key, or of the first empty slot of its probe
// sequence (ok false).
func (s *slabStore) find(key string, h uint64) (int, bool) {
	mask := len(s.slots) - 1
	free := -1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		switch {
		case sl.at == 0:
			if free >= 0 {
				return free, false
			}
			return i, false
		case sl.at == deleted:
			if free < 0 {
				free = i
			}
		case sl.hash == h && string(s.keyAt(sl.at)) == key:
			return i, true
		}
	}
}

// record returns the key and value of the record at.
func (s *slabStore) record(at uint64) (key, value []byte) {
	slab := s.slabs[at>>32-1]
	off := int(uint32(at))
	kl := int(binary.LittleEndian.Uint32(slab[off:]))
	vl := int(binary.LittleEndian.Uint32(slab[off+4:]))
	k := off + recordHeader
	return slab[k : k+kl : k+kl], slab[k+kl : k+kl+vl : k+kl+vl]
}

func (s *slabStore) keyAt(at uint64) []byte {
	k, _ := s.record(at)
	return k
}

func (s *slabStore) size(at uint64) int64 {
	k, v := s.record(at)
	return int64(recordHeader + len(k) + len(v))
}

// Get returns key's value. It is the store's own bytes: the caller must
// not change them.
func (s *slabStore) Get(key string) ([]byte, bool, error) {
	i, ok := s.find(key, maphash.String(s.seed, key))
	if !ok {
		return nil, false, nil
	}
	_, v := s.record(s.slots[i].at)
	return v, true, nil
}

// Set sets key's value (a copy of value).
func (s *slabStore) Set(key string, value []byte) error {
	s.reclaim()
	h := maphash.String(s.seed, key)
	at := s.append(key, value)
	i, ok := s.find(key, h)
	if ok {
		s.dead += s.size(s.slots[i].at)
		s.slots[i].at = at
		return nil
	}
	if s.slots[i].at == 0 {
		s.used++
	}
	s.slots[i] = slot{at: at, hash: h}
	s.live++
	if s.used*4 >= len(s.slots)*3 {
		s.rehash()
	}
	return nil
}

// Delete removes key.
func (s *slabStore) Delete(key string) error {
	i, ok := s.find(key, maphash.String(s.seed, key))
	if !ok {
		return nil
	}
	s.dead += s.size(s.slots[i].at)
	s.slots[i].at = deleted
	s.live--
	s.reclaim()
	return nil
}

// append writes a record of key and value at the end of the last slab (a
// new one if it has no room) and returns where.
func (s *slabStore) append(key string, value []byte) uint64 {
	n := recordHeader + len(key) + len(value)
	last := len(s.slabs) - 1
	if last < s.oldest || len(s.slabs[last])+n > cap(s.slabs[last]) {
		s.slabs = append(s.slabs, make([]byte, 0, max(s.slabSize, n)))
		last = len(s.slabs) - 1
	}
	slab := s.slabs[last]
	off := len(slab)
	slab = binary.LittleEndian.AppendUint32(slab, uint32(len(key)))
	slab = binary.LittleEndian.AppendUint32(slab, uint32(len(value)))
	slab = append(slab, key...)
	s.slabs[last] = append(slab, value...)
	s.bytes += int64(n)
	return uint64(last+1)<<32 | uint64(off)
}

// rehash doubles the index if it is more than half live, else rebuilds it
// at its size without the deleted slots.
func (s *slabStore) rehash() {
	n := len(s.slots)
	if s.live*2 >= n {
		n *= 2
	}
	old := s.slots
	s.slots, s.used = make([]slot, n), 0
	mask := n - 1
	for _, sl := range old {
		if sl.at == 0 || sl.at == deleted {
			continue
		}
		i := int(sl.hash) & mask
		for s.slots[i].at != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = sl
		s.used++
	}
}

// reclaim moves the live records of the oldest slabs to the end and drops
// them, for as long as dead bytes are half of the slabs (and the oldest is
// not the one written to). The oldest slabs hold the most superseded
// records; a write usually moves one slab, and each live byte is moved
// once per turn of the slabs, which frees at least as many dead bytes.
func (s *slabStore) reclaim() {
	for s.dead*2 >= s.bytes && s.oldest < len(s.slabs)-1 {
		id := s.oldest
		slab := s.slabs[id]
		for off := 0; off < len(slab); {
			at := uint64(id+1)<<32 | uint64(off)
			k, v := s.record(at)
			n := recordHeader + len(k) + len(v)
			if i, ok := s.find(string(k), maphash.Bytes(s.seed, k)); ok && s.slots[i].at == at {
				s.slots[i].at = s.append(string(k), v)
			} else {
				s.dead -= int64(n)
			}
			s.bytes -= int64(n)
			off += n
		}
		s.slabs[id] = nil
		s.oldest++
	}
}
