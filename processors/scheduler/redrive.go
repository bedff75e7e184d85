package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// RedriveGroup is the consumer group whose committed offsets on
// scheduler.dead say how far a stage's dead letters were re-driven.
func RedriveGroup(stage string) string { return "scheduler-redrive-" + stage }

// Redrive queues again the offers of the stage's dead letters written
// since its last redrive (of both its queues, each to the queue it came
// from), then records how far it read: each dead letter is re-driven once.
// The aggregate queues an offer that is not queued already; its worker
// then asks the stage as for a fresh change. It returns the offers queued
// and the stage's dead letters read.
func Redrive(ctx context.Context, kafka *streams.Cluster, stage string) (queued, letters int, err error) {
	if err := offers.ValidStage(stage); err != nil {
		return 0, 0, err
	}
	cl, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ClientID("offerlog-redrive"))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	adm := kafka.Admin()
	ends, err := streams.EndOffsets(ctx, adm, topics.SchedulerDead)
	if err != nil {
		return 0, 0, fmt.Errorf("redrive %s: %w", stage, err)
	}
	committed, err := adm.FetchOffsets(ctx, RedriveGroup(stage))
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) { // none: the first redrive
		return 0, 0, fmt.Errorf("redrive %s: %w", stage, err)
	}
	from := map[int32]int64{}
	for p := range ends {
		from[p] = 0
		if o, ok := committed.Lookup(topics.SchedulerDead, p); ok && o.At > 0 {
			from[p] = o.At
		}
	}
	seen := map[string]bool{}
	var cmds []*schemas.OfferCommand
	err = streams.ReadRange(ctx, kafka, topics.SchedulerDead, from, ends, func(r *kgo.Record) {
		var d schemas.DeadLetter
		if schemas.DeadLetters.Decode(r.Value, &d) != nil {
			return
		}
		low := d.Topic == topics.QueueTopic(stage, true)
		if !low && d.Topic != topics.QueueTopic(stage, false) {
			return
		}
		letters++
		id := string(d.Key)
		if id == "" || seen[id] {
			return
		}
		seen[id] = true
		cmds = append(cmds, &schemas.OfferCommand{Kind: schemas.CommandEnqueue, OfferID: id, ExpectedVersion: -1, ReadVersion: -1, Stage: stage, Low: low})
	})
	if err != nil {
		return 0, letters, fmt.Errorf("redrive %s: %w", stage, err)
	}
	if err := offers.SendCommands(ctx, cl, cmds); err != nil {
		return 0, letters, fmt.Errorf("redrive %s: %w", stage, err)
	}
	var done kadm.Offsets
	for p, end := range ends {
		done.Add(kadm.Offset{Topic: topics.SchedulerDead, Partition: p, At: end, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(ctx, RedriveGroup(stage), done); err != nil {
		return len(cmds), letters, fmt.Errorf("redrive %s: queued %d offers, progress not recorded: %w", stage, len(cmds), err)
	}
	return len(cmds), letters, nil
}
