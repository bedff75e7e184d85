package platform

import (
	"context"
	"errors"
	"testing"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
)

// The answer hub hands an answer to every matcher added, and to none once
// its owner removed it (a component restarted registers its new one).
func TestAnswerHubHandsAnswersToItsMatchers(t *testing.T) {
	var hub answerHub
	a, b := offers.NewResults(nil), offers.NewResults(nil)
	hub.add(a)
	removeB := hub.add(b)
	answer := func(offset int64) schemas.OfferResult {
		return schemas.OfferResult{OfferID: "o1", SourcePartition: 1, SourceOffset: offset, Outcome: schemas.OutcomeOK, Version: offset}
	}
	// A waiter gives up at once unless its answer is there.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	has := func(m *streams.Replies[schemas.OfferResult], offset int64) bool {
		got, err := m.Wait(gone, streams.RequestID{Partition: 1, Offset: offset})
		if err != nil && !errors.Is(err, streams.ErrNoReply) {
			t.Fatal(err)
		}
		return err == nil && got == answer(offset)
	}

	hub.deliver(answer(7))
	if !has(a, 7) || !has(b, 7) {
		t.Fatal("an answer did not reach both matchers")
	}
	removeB()
	hub.deliver(answer(8))
	if !has(a, 8) {
		t.Fatal("the matcher left did not get the answer")
	}
	if has(b, 8) {
		t.Fatal("a removed matcher still got an answer")
	}
}

// Matchers come and go while answers are handed over (components stop and
// restart while the aggregate answers): no race (-race), none lost by the
// matchers that stay.
func TestAnswerHubChangesWhileItDelivers(t *testing.T) {
	var hub answerHub
	stays := make([]*streams.Replies[schemas.OfferResult], 8)
	for i := range stays {
		stays[i] = offers.NewResults(nil)
		hub.add(stays[i])
	}
	const n = 2000
	start, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-start
		for range n {
			hub.add(offers.NewResults(nil))()
		}
	}()
	close(start)
	for i := range int64(n) {
		hub.deliver(schemas.OfferResult{OfferID: "o", SourcePartition: 0, SourceOffset: i})
	}
	<-done
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, m := range stays {
		for i := range int64(n) {
			if _, err := m.Wait(gone, streams.RequestID{Partition: 0, Offset: i}); err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
		}
	}
}
