package streams

import (
	"fmt"
	"hash"
)

// Murmur2 returns Kafka's murmur2 hash of b, the hash the Java client,
// franz-go's default partitioner and librdkafka's "murmur2" partitioner use.
func Murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		b = b[4:]
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// Partition returns the partition of key among n partitions, as Kafka's
// default partitioner places it.
func Partition(key string, n int32) int32 {
	return int32(Murmur2([]byte(key))&0x7fffffff) % n
}

// kafkaHash is a hash.Hash32 whose Sum32 is murmur2 with the sign bit
// cleared, so that goka's and sarama's "abs(int32(h)) % n" equals Kafka's
// "(h & 0x7fffffff) % n" and every client agrees on a key's partition.
type kafkaHash struct{ buf []byte }

// KafkaHasher returns a constructor of hashers for goka (WithHasher) that
// place keys where Kafka's default partitioner does.
func KafkaHasher() func() hash.Hash32 { return func() hash.Hash32 { return &kafkaHash{} } }

func (h *kafkaHash) Write(p []byte) (int, error) { h.buf = append(h.buf, p...); return len(p), nil }
func (h *kafkaHash) Sum(b []byte) []byte {
	s := h.Sum32()
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}
func (h *kafkaHash) Reset()         { h.buf = h.buf[:0] }
func (h *kafkaHash) Size() int      { return 4 }
func (h *kafkaHash) BlockSize() int { return 4 }
func (h *kafkaHash) Sum32() uint32  { return Murmur2(h.buf) & 0x7fffffff }

// Misplaced returns why a record of key read from partition is not where
// Kafka's default partitioner (murmur2) puts it among partitions, or ""
// (also for partitions 0: unknown). A table's processor must refuse such a
// record: the key's state lives in another partition, where an older
// version would win.
func Misplaced(key string, partition, partitions int32) string {
	if partitions <= 0 {
		return ""
	}
	if want := Partition(key, partitions); want != partition {
		return fmt.Sprintf("key %q belongs on partition %d of %d (murmur2, as the Java client and franz-go place keys), not %d",
			key, want, partitions, partition)
	}
	return ""
}
