// Package serving is the serving cache of seeds/sharded-cache.md: servers
// that each materialise one shard (a half-open range of partitions) of a
// table topic and answer Get over gRPC, shard ownership per data centre
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

// Holds reports whether key belongs to shard s: the partition Kafka's
// default partitioner gives it is in [lo, hi).
func Holds(s *servingv1.Shard, key string) bool {
	if s == nil || s.Partitions < 1 {
		return false
	}
	p := streams.Partition(key, s.Partitions)
	return p >= s.Lo && p < s.Hi
}
