// Package serving is the serving cache of seeds/sharded-cache.md: servers
// that each materialise one shard of a table topic (a range of hashes of
// its keys, or a half-open range of its partitions) and answer Get over
// gRPC, shard ownership per data centre
// (ZooKeeper, or a fixed shard for one process), and the client that fans
// every key out to every replica of its shard and returns the first full
// answer.
package serving

import (
	"fmt"

	"github.com/offerlog/offerlog/schemas/proto/servingv1"
	"github.com/offerlog/offerlog/streams"
)

// Range returns shard i of n over a topic of the given partitions: a
// half-open range of partitions, the first partitions%n shards one longer.
func Range(i, n int, partitions int32) (lo, hi int32, err error) {
	if n < 1 || int32(n) > partitions || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("serving: shard %d of %d over %d partitions", i, n, partitions)
	}
	size, extra := partitions/int32(n), partitions%int32(n)
	lo = int32(i)*size + min(int32(i), extra)
	hi = lo + size
	if int32(i) < extra {
		hi++
	}
	return lo, hi, nil
}

// DefaultVirtual is the number of virtual shards a table is cut into by
// hash ranges (ServerConfig.Virtual): as many servers as that may share a
// data centre's copy of a table.
const DefaultVirtual = 1024

// Holds reports whether key belongs to shard s: with virtual shards, its
// murmur2 hash modulo s.Virtual is in [lo, hi); else the partition Kafka's
// default partitioner gives it is.
func Holds(s *servingv1.Shard, key string) bool {
	if s == nil {
		return false
	}
	if s.Virtual > 0 {
		v := streams.Partition(key, s.Virtual)
		return v >= s.Lo && v < s.Hi
	}
	if s.Partitions < 1 {
		return false
	}
	p := streams.Partition(key, s.Partitions)
	return p >= s.Lo && p < s.Hi
}

// describe names what s holds, for errors and logs.
func describe(s *servingv1.Shard) string {
	if s == nil {
		return "no shard"
	}
	if s.Virtual > 0 {
		return fmt.Sprintf("virtual shards [%d, %d) of %d", s.Lo, s.Hi, s.Virtual)
	}
	return fmt.Sprintf("partitions [%d, %d)", s.Lo, s.Hi)
}
