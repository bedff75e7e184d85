package offers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// IDBlock is how many ids one BLOCK claim on offers.ids gives: part of
// the id format, like the topic's partition count.
const IDBlock = 1000

// idsPerPartition is the share of the id space of one partition of
// offers.ids.
const idsPerPartition = idSpace / topics.OffersIDsPartitions

// ErrIDsExhausted is returned when a partition of offers.ids has given
// every id of its share.
var ErrIDsExhausted = errors.New("offers.ids: the partition's share of offer ids is used up")

// IDs hands out offer ids unique by construction, with no collision to
// retry (gost.md asks for ids globally unique, not guessable, short and
// numeric). Each id is the image, under a keyed Permutation, of a counter
// no other id has: the counter is the partition and offset of a BLOCK
// claim on offers.ids (which Kafka never gives twice) times IDBlock, plus
// the id's place in the block. The key is the first KEY claim of partition
// 0, written once by the first process that found none: as secret as the
// cluster's data. A process that stops loses what is left of its block.
// Safe for concurrent use.
type IDs struct {
	producer *kgo.Client
	perm     Permutation
	by       string

	mu        sync.Mutex
	partition int32 // of the next claim, rotating
	next, end uint64
	unused    []string // ids handed out and given back (Unused)
}

// maxUnused bounds the ids kept for reuse.
const maxUnused = 10_000

// OpenIDs reads the permutation's key from offers.ids, writing it first
// if the topic has none. by names this process in its claims. Close it.
func OpenIDs(ctx context.Context, c *streams.Cluster, by string) (*IDs, error) {
	producer, err := c.Producer("offer-ids", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	var start [1]byte
	_, _ = rand.Read(start[:])
	a := &IDs{producer: producer, by: by, partition: int32(start[0]) % topics.OffersIDsPartitions}
	for range 2 {
		key, err := readIDKey(ctx, c)
		if err != nil {
			producer.Close()
			return nil, err
		}
		if key != nil {
			a.perm = NewPermutation(key)
			return a, nil
		}
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		// Every claim has its own key, so compaction keeps them all, and
		// the first KEY of partition 0 stays the one.
		if _, err := a.claim(ctx, schemas.IDClaim{Kind: schemas.IDClaimKey, Secret: secret, By: by, At: time.Now()}, 0); err != nil {
			producer.Close()
			return nil, err
		}
	}
	producer.Close()
	return nil, errors.New("offers.ids: no key after writing one")
}

// Close closes the producer.
func (a *IDs) Close() { a.producer.Close() }

// readIDKey returns the secret of the first KEY claim of partition 0 (nil
// when there is none).
func readIDKey(ctx context.Context, c *streams.Cluster) ([]byte, error) {
	var key []byte
	first := int64(-1)
	err := streams.ReadToEnd(ctx, c, topics.OffersIDs, func(r *kgo.Record) {
		if r.Partition != 0 || (first >= 0 && r.Offset > first) {
			return
		}
		var c schemas.IDClaim
		if err := schemas.IDClaims.Decode(r.Value, &c); err != nil || c.Kind != schemas.IDClaimKey || len(c.Secret) < 16 {
			return
		}
		key, first = c.Secret, r.Offset
	})
	if err != nil {
		return nil, fmt.Errorf("offers.ids: read the key: %w", err)
	}
	return key, nil
}

// claim appends c to partition of offers.ids and returns its offset.
func (a *IDs) claim(ctx context.Context, c schemas.IDClaim, partition int32) (int64, error) {
	value, err := schemas.IDClaims.Encode(&c)
	if err != nil {
		return 0, err
	}
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	rec := &kgo.Record{Topic: topics.OffersIDs, Partition: partition, Key: []byte(c.Kind + "/" + hex.EncodeToString(nonce[:])), Value: value}
	if err := a.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, fmt.Errorf("offers.ids: claim %s: %w", c.Kind, err)
	}
	return rec.Offset, nil
}

// New returns a fresh offer id, claiming a block when the one in hand is
// used up.
func (a *IDs) New(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.unused); n > 0 {
		id := a.unused[n-1]
		a.unused = a.unused[:n-1]
		return id, nil
	}
	if a.next == a.end {
		p := a.partition
		a.partition = (a.partition + 1) % topics.OffersIDsPartitions
		offset, err := a.claim(ctx, schemas.IDClaim{Kind: schemas.IDClaimBlock, By: a.by, At: time.Now()}, p)
		if err != nil {
			return "", err
		}
		first, ok := blockStart(p, offset)
		if !ok {
			return "", fmt.Errorf("%w (partition %d, offset %d)", ErrIDsExhausted, p, offset)
		}
		a.next, a.end = first, first+IDBlock
	}
	n := a.next
	a.next++
	return IDFrom(a.perm.Of(n)), nil
}

// Unused gives back an id New handed out that is certain never to be used
// (a command that offered it was answered without it): the next New hands
// it out again, so that asking for a draft a visitor already has costs no
// id of the space.
func (a *IDs) Unused(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.unused) < maxUnused {
		a.unused = append(a.unused, id)
	}
}

// blockStart returns the first counter of the block claimed at (partition,
// offset), and false past the partition's share.
func blockStart(partition int32, offset int64) (uint64, bool) {
	if partition < 0 || partition >= topics.OffersIDsPartitions || offset < 0 || uint64(offset) >= idsPerPartition/IDBlock {
		return 0, false
	}
	return uint64(partition)*idsPerPartition + uint64(offset)*IDBlock, true
}
