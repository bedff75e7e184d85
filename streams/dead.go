package streams

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
)

// NewDeadLetter returns the dead letter of a message that group could not
// decode: where it was, its key and value byte for byte, and why.
func NewDeadLetter(group, topic string, partition int32, offset int64, key, value []byte, at time.Time, reason string) *schemas.DeadLetter {
	return &schemas.DeadLetter{
		Topic: topic, Partition: partition, Offset: offset,
		Key: append([]byte{}, key...), Value: append([]byte{}, value...),
		Reason: reason, Group: group, Timestamp: at,
	}
}

// DeadLetterRecord returns the record that sends r, which group could not
// decode, to the dead-letter topic deadTopic, keyed as r was.
func DeadLetterRecord(deadTopic, group string, r *kgo.Record, reason string) (*kgo.Record, error) {
	data, err := schemas.DeadLetters.Encode(NewDeadLetter(group, r.Topic, r.Partition, r.Offset, r.Key, r.Value, r.Timestamp, reason))
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: deadTopic, Key: r.Key, Value: data}, nil
}
