package search

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/offerlog/offerlog/streams/replay"
	"github.com/offerlog/offerlog/topics"
)

// Replay rebuilds cfg's indexes from the feeds (offerlog replay searcher):
// with no member of the searcher's group running, it wipes cfg.Dir and
// the group's commits, then runs a searcher until it has applied every
// feed to the end it had when the replay began.
func Replay(ctx context.Context, cfg Config) error {
	adm := cfg.Cluster.Admin()
	if _, err := (replay.Spec{Group: Group, StateDir: cfg.Dir, Logger: cfg.Logger}).Prepare(ctx, adm); err != nil {
		return err
	}
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	var feeds []string
	for _, t := range listed.Names() {
		if strings.HasPrefix(t, topics.SaasPrefix) {
			feeds = append(feeds, t)
		}
	}
	s := New(cfg)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	stop := func() error {
		cancel()
		return <-done
	}
	if len(feeds) == 0 {
		return stop()
	}
	ends, err := adm.ListEndOffsets(ctx, feeds...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return errors.Join(err, stop())
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		behind := 0
		ends.Each(func(o kadm.ListedOffset) {
			client := strings.TrimPrefix(o.Topic, topics.SaasPrefix)
			if o.Offset > 0 && s.Applied(client, o.Partition) < o.Offset {
				behind++
			}
		})
		if behind == 0 {
			s.cfg.Logger.Info("replay searcher: every feed applied", "feeds", len(feeds))
			return stop()
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("replay searcher: %d partitions behind: %w", behind, ctx.Err()), stop())
		case err := <-done:
			return fmt.Errorf("replay searcher: the searcher stopped: %w", err)
		case <-tick.C:
		}
	}
}
