package streams

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
)

// MaxDeadLetterValue is how much of a record's value (and key, and all its
// headers together) a dead letter keeps. The rest is summed up by its size
// and SHA-256, so a dead letter is always small enough to be written, however
// large the record it stands for.
const MaxDeadLetterValue = 64 << 10

// NewDeadLetter returns the dead letter of a message that group could not
// handle: where it was, its key and value (each cut to MaxDeadLetterValue,
// with the original size and the value's SHA-256), and why.
func NewDeadLetter(group, topic string, partition int32, offset int64, key, value []byte, at time.Time, reason string) *schemas.DeadLetter {
	sum := sha256.Sum256(value)
	return &schemas.DeadLetter{
		Topic: topic, Partition: partition, Offset: offset,
		Key: cut(key), KeySize: int64(len(key)),
		Value: cut(value), ValueSize: int64(len(value)), ValueSHA256: sum[:], NullValue: value == nil,
		Reason: cutString(reason), Group: group, Timestamp: at, Headers: []schemas.DeadLetterHeader{},
	}
}

func cut(b []byte) []byte {
	return append([]byte{}, b[:min(len(b), MaxDeadLetterValue)]...)
}

func cutString(s string) string {
	const max = 4 << 10
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// DeadLetterRecord returns the record that sends r, which group could not
// handle, to the dead-letter topic deadTopic with the reason, keyed as r was
// (cut to the bound). It is at most a little over 3 × MaxDeadLetterValue
// whatever the size of r.
func DeadLetterRecord(deadTopic, group string, r *kgo.Record, reason string) (*kgo.Record, error) {
	d := NewDeadLetter(group, r.Topic, r.Partition, r.Offset, r.Key, r.Value, r.Timestamp, reason)
	room := MaxDeadLetterValue
	for _, h := range r.Headers {
		if n := len(h.Key) + len(h.Value); n <= room {
			d.Headers = append(d.Headers, schemas.DeadLetterHeader{Key: h.Key, Value: append([]byte{}, h.Value...)})
			room -= n
		}
	}
	data, err := schemas.DeadLetters.Encode(d)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: deadTopic, Key: d.Key, Value: data}, nil
}

// RedriveRecord returns the record that puts the dead letter d back on its
// original topic and partition, as it was: key, value and headers. It
// returns an error for a dead letter that kept only part of its record.
func RedriveRecord(d *schemas.DeadLetter) (*kgo.Record, error) {
	if !d.Complete() {
		return nil, fmt.Errorf("%s[%d]@%d: only %d of %d bytes were kept: it cannot be put back", d.Topic, d.Partition, d.Offset, len(d.Value), d.ValueSize)
	}
	r := &kgo.Record{Topic: d.Topic, Partition: d.Partition, Key: d.Key, Value: d.Value}
	if d.NullValue {
		r.Value = nil
	} else if r.Value == nil {
		r.Value = []byte{}
	}
	for _, h := range d.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: RedrivenHeader, Value: fmt.Appendf(nil, "%s/%d/%d", d.Topic, d.Partition, d.Offset)})
	return r, nil
}

// RedrivenHeader marks a record put back on its topic from a dead letter;
// its value is "topic/partition/offset" of the original.
const RedrivenHeader = "offerlog-redriven-from"

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
