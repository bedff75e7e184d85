package streams

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// NewProducer returns a franz-go client that produces with acks=all and no
// linger, for the commands, outputs and dead letters of the component name.
// extra options come last.
func NewProducer(brokers []string, name string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.ClientID("offerlog-" + name), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0)}
	return NewClient(brokers, append(opts, extra...)...)
}
