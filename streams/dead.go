package streams

import (
	"context"
	"fmt"
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

// SyncProducer is what SendDeadLetter writes with: a client, or a
// transaction session.
type SyncProducer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// SendDeadLetter writes r, which group could not handle, to deadTopic with
// the reason, and waits for the write.
func SendDeadLetter(ctx context.Context, p SyncProducer, deadTopic, group string, r *kgo.Record, reason string) error {
	rec, err := DeadLetterRecord(deadTopic, group, r, reason)
	if err != nil {
		return err
	}
	if err := p.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("dead letter to %s: %w", deadTopic, err)
	}
	return nil
}
