package table

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/offerlog/offerlog/streams"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnBound bounds a batch's transaction, from its first record to its
// commit: one not done by then is aborted (its records not all written)
// or its end unknown (the commit not answered), which stops the group.
const txnBound = 10 * time.Second

// txnTimeout is the broker's bound on a writer's open transaction: one a
// member left open (a kill between its records and its commit) holds the
// partition's committed readers until its next holder fences it, or this
// long.
const txnTimeout = 20 * time.Second

// fence makes partition p's writer, st.tx, unless it has one since its
// assignment: a producer of the partition's transactional id, initialised
// before the store reads the changelog. Initialising the id aborts a
// transaction an earlier holder of the partition left open and fences that
// holder: its later writes are refused, however late they reach the
// broker. Called with st.mu held.
func (g *Group) fence(ctx context.Context, p int32, st *tableStore) error {
	if st.tx != nil {
		return nil
	}
	id := g.Table.Writer(p)
	tx, err := g.Streams.Cluster.Transactional(g.Name+"-table", id, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(1<<20), kgo.ProducerLinger(0), kgo.TransactionTimeout(txnTimeout))
	if err != nil {
		return fmt.Errorf("%s: the writer of %s[%d]: %w", g.Name, g.Table, p, err)
	}
	if _, _, err := tx.ProducerID(ctx); err != nil {
		tx.Close()
		return fmt.Errorf("%s: fence the earlier writers of %s[%d] (%s): %w", g.Name, g.Table, p, id, err)
	}
	st.tx = tx
	return nil
}

// closeWriter closes the partition's writer: the partition is no longer
// this member's, or the group stops. Called with st.mu held.
func (st *tableStore) closeWriter() {
	if st.tx != nil {
		st.tx.Close()
		st.tx = nil
	}
}

// transact writes recs (their partitions set) in one transaction of the
// partition's writer, within txnBound. A transaction that fails before
// its commit is aborted, and the error is the batch's (the loop tries it
// again, on a table that holds nothing of it). A writer fenced (another
// member holds the partition now), an abort that fails or a commit not
// answered are Fatal: the group stops, and the partition's next holder
// restores from the changelog, which holds the transaction whole or not
// at all. Called with st.mu held.
func (g *Group) transact(ctx context.Context, st *tableStore, recs []*kgo.Record) error {
	if st.tx == nil {
		return streams.Fatal(errors.New("the partition has no writer (it is not this member's)"))
	}
	ctx, cancel := context.WithTimeout(ctx, txnBound)
	defer cancel()
	if err := st.tx.BeginTransaction(); err != nil {
		return streams.Fatal(fmt.Errorf("begin: %w", err))
	}
	if err := st.tx.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		if fenced(err) {
			return streams.Fatal(fmt.Errorf("fenced: %w", err))
		}
		if aerr := abort(st.tx); aerr != nil {
			return streams.Fatal(errors.Join(err, fmt.Errorf("abort: %w", aerr)))
		}
		return err
	}
	if err := st.tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return streams.Fatal(fmt.Errorf("commit (its end is unknown): %w", err))
	}
	return nil
}

// abort drops what tx has buffered and aborts its transaction, within
// txnBound of its own (the batch's context may be what ended).
func abort(tx *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnBound)
	defer cancel()
	return errors.Join(tx.AbortBufferedRecords(ctx), tx.EndTransaction(ctx, kgo.TryAbort))
}

// fenced reports whether err says another producer of the writer's
// transactional id was initialised since.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}
