package streams

import (
	"time"

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
