package streams

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Position is how far a reader that follows a topic without a group (a
// catalogue, a token store) has read it, so that it can wait until it has
// read everything written before a moment. Safe for concurrent use; the
// zero value is ready to use.
type Position struct {
	mu       sync.Mutex
	consumed map[int32]int64 // next offset per partition
	changed  chan struct{}   // closed and replaced on every advance
}

// Advance records that every record of partition below next was read.
func (p *Position) Advance(partition int32, next int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.consumed == nil {
		p.consumed = map[int32]int64{}
	}
	if next > p.consumed[partition] {
		p.consumed[partition] = next
	}
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// Sync waits until the reader has read topic up to its end offsets as of
// the call; it returns ctx's error if ctx ends first.
func (p *Position) Sync(ctx context.Context, adm *kadm.Client, topic string) error {
	ends, err := EndOffsets(ctx, adm, topic)
	if err != nil {
		return err
	}
	for {
		p.mu.Lock()
		behind := false
		for part, end := range ends {
			if p.consumed[part] < end {
				behind = true
			}
		}
		if p.changed == nil {
			p.changed = make(chan struct{})
		}
		wait := p.changed
		p.mu.Unlock()
		if !behind {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	}
}
