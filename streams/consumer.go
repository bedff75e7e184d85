package streams

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// NewConsumer returns a franz-go client of consumer group that commits by
// hand what it has handled: a new group starts at the beginning of its
// topics, only committed records are read, rebalances wait between polls
// (call AllowRebalance after each, and before Close), and it produces with
// acks=all (dead letters, commands). extra options come last.
func NewConsumer(brokers []string, group string, topics []string, wait time.Duration, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.FetchMaxWait(wait), kgo.ClientID("offerlog-" + group)}
	return kgo.NewClient(append(opts, extra...)...)
}
