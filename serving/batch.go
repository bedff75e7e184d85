package serving

import (
	"context"

	"github.com/offerlog/offerlog/schemas/proto/servingv1"
)

// DefaultMaxInFlight is how many Gets a client has in flight to one host
// when ClientConfig names none.
const DefaultMaxInFlight = 4

// A batch is the Gets to one host (with or without offsets): at most
// MaxInFlight requests are in flight at once, and the Gets that arrive
// meanwhile wait and go together in the next request. Under load a
// request carries the keys of many Gets (one gRPC call, one answer, for
// what were as many calls); alone, a Get goes at once. Its fields are
// under the Client's mu.
type batch struct {
	busy    int
	waiting []*waiter
}

// A waiter is a Get waiting for a request of its batch.
type waiter struct {
	keys []string
	done chan answerOf // buffered: the sender never blocks
}

type answerOf struct {
	resp *servingv1.GetResponse
	err  error
}

type batchKey struct {
	host        string
	withOffsets bool
}

// batched sends keys to host in a request of its batch and returns its
// part of the answer: at once when fewer than MaxInFlight requests are in
// flight, else with the other keys that wait. ctx bounds the wait; the
// request itself has the per-host timeout.
func (c *Client) batched(ctx context.Context, host string, keys []string, withOffsets bool) (*servingv1.GetResponse, error) {
	k := batchKey{host, withOffsets}
	c.mu.Lock()
	b := c.batches[k]
	if b == nil {
		b = &batch{}
		c.batches[k] = b
	}
	if b.busy < c.cfg.MaxInFlight {
		b.busy++
		c.mu.Unlock()
		resp, err := c.call(ctx, host, keys, withOffsets)
		c.next(ctx, k, b)
		return resp, err
	}
	w := &waiter{keys: keys, done: make(chan answerOf, 1)}
	b.waiting = append(b.waiting, w)
	c.mu.Unlock()
	select {
	case a := <-w.done:
		return a.resp, a.err
	case <-ctx.Done():
		// The request goes on and its answer is dropped into the buffer.
		return nil, ctx.Err()
	}
}

// next hands a finished request's place to the Gets waiting in its batch:
// one request of all their keys, sent by a goroutine that goes on while
// more wait, and then gives the place up.
func (c *Client) next(ctx context.Context, k batchKey, b *batch) {
	ws := c.take(b)
	if len(ws) == 0 {
		return
	}
	bg := context.WithoutCancel(ctx)
	go func() {
		for ; len(ws) > 0; ws = c.take(b) {
			c.send(bg, k, ws)
		}
	}()
}

// take returns the Gets waiting in b, and gives up the place of the
// request that finished when none wait.
func (c *Client) take(b *batch) []*waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := b.waiting
	b.waiting = nil
	if len(ws) == 0 {
		b.busy--
	}
	return ws
}

// send sends the keys of ws in one request and gives each waiter its
// part of the answer. A request refused as a whole because some keys are
// not in the host's shard (one Get routed by a stale map) is sent again
// Get by Get, so that the others are answered.
func (c *Client) send(ctx context.Context, k batchKey, ws []*waiter) {
	if len(ws) == 1 {
		resp, err := c.call(ctx, k.host, ws[0].keys, k.withOffsets)
		ws[0].done <- answerOf{resp, err}
		return
	}
	var keys []string
	for _, w := range ws {
		keys = append(keys, w.keys...)
	}
	resp, err := c.call(ctx, k.host, dedupe(keys), k.withOffsets)
	switch {
	case err != nil:
		for _, w := range ws {
			w.done <- answerOf{nil, err}
		}
		return
	case !resp.AllMatched:
		for _, w := range ws {
			c.send(ctx, k, []*waiter{w})
		}
		return
	}
	entries := make(map[string]*servingv1.Entry, len(resp.Entries))
	for _, e := range resp.Entries {
		entries[e.Key] = e
	}
	for _, w := range ws {
		part := &servingv1.GetResponse{Shard: resp.Shard, AllMatched: true, NextOffsets: resp.NextOffsets,
			Entries: make([]*servingv1.Entry, 0, len(w.keys))}
		for _, key := range w.keys {
			if e, ok := entries[key]; ok {
				part.Entries = append(part.Entries, e)
			}
		}
		w.done <- answerOf{part, nil}
	}
}
