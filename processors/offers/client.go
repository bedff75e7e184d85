package offers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Client sends commands to the aggregate and waits for their answers
// (request/reply over offers.commands and offers.results). Safe for
// concurrent use.
type Client struct {
	producer *kgo.Client
	replies  *streams.Replies[schemas.OfferResult]
	timeout  time.Duration
	hops     *metrics.HistogramVec // nil: not observed
}

// ObserveHops makes the client observe each command's hops on h, path
// "offer": append (the command acknowledged) and answer (the aggregate's
// answer matched), and its matcher's reply hop (an answer's time from the
// aggregate's emit to the matcher: Replies.ObserveTransit). Call it before
// the first command; it returns cl.
func (cl *Client) ObserveHops(h *metrics.HistogramVec) *Client {
	cl.hops = h
	reply := h.With("offer", "reply")
	cl.replies.ObserveTransit(func(d time.Duration) { reply.Observe(d.Seconds()) })
	return cl
}

func (cl *Client) observe(hop string, since time.Time) {
	if cl.hops != nil {
		cl.hops.With("offer", hop).Observe(time.Since(since).Seconds())
	}
}

// NewResults returns the matcher of the aggregate's answers; run it (Run)
// before the first command whose answer is awaited.
func NewResults(log *slog.Logger) *streams.Replies[schemas.OfferResult] {
	return streams.NewReplies(topics.OffersResults, 10*time.Second, log, func(b []byte) (schemas.OfferResult, streams.RequestID, error) {
		var r schemas.OfferResult
		err := schemas.OfferResults.Decode(b, &r)
		return r, streams.RequestID{Partition: r.SourcePartition, Offset: r.SourceOffset}, err
	})
}

// NewClient returns a client producing with producer (acks=all) and
// matching answers with replies; an answer not there within timeout is
// ErrNoAnswer.
func NewClient(producer *kgo.Client, replies *streams.Replies[schemas.OfferResult], timeout time.Duration) *Client {
	return &Client{producer: producer, replies: replies, timeout: timeout}
}

// ErrNoAnswer is returned when the aggregate did not answer in time; the
// command is logged and will be decided.
var ErrNoAnswer = errors.New("offers: no answer from the aggregate in time")

// Do sends c and returns the aggregate's answer.
func (cl *Client) Do(ctx context.Context, c *schemas.OfferCommand) (schemas.OfferResult, error) {
	out, errs := cl.DoAll(ctx, []*schemas.OfferCommand{c})
	return out[0], errs[0]
}

// DoAll sends every command, concurrently, and returns their answers in
// order, with an error for each one that got none.
func (cl *Client) DoAll(ctx context.Context, cs []*schemas.OfferCommand) ([]schemas.OfferResult, []error) {
	out := make([]schemas.OfferResult, len(cs))
	errs := make([]error, len(cs))
	ctx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range cs {
		data, err := schemas.OfferCommands.Encode(c)
		if err != nil {
			errs[i] = fmt.Errorf("offers: encode command: %w", err)
			continue
		}
		wg.Add(1)
		appended := time.Now()
		cl.producer.Produce(ctx, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(c.OfferID), Value: data},
			func(r *kgo.Record, err error) {
				if err != nil {
					errs[i] = fmt.Errorf("offers: append command: %w", err)
					wg.Done()
					return
				}
				cl.observe("append", appended)
				go func() {
					defer wg.Done()
					waited := time.Now()
					res, err := cl.replies.Wait(ctx, streams.RequestID{Partition: r.Partition, Offset: r.Offset})
					if err != nil {
						errs[i] = fmt.Errorf("%w: %w", ErrNoAnswer, err)
						return
					}
					cl.observe("answer", waited)
					out[i] = res
				}()
			})
	}
	wg.Wait()
	return out, errs
}
