package streams

import (
	"context"
	"fmt"

	"github.com/offerlog/offerlog/third_party/forked/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/topics"
)

// RunProcessor runs a goka processor of graph until ctx is done, calling
// onReady (if not nil) once it has recovered its table and is processing.
// It returns nil after a clean shutdown (processed messages committed).
func RunProcessor(ctx context.Context, s Config, graph *goka.GroupGraph, onReady func()) error {
	if err := s.Validate(); err != nil {
		return err
	}
	proc, err := goka.NewProcessor(s.Brokers, graph, s.ProcessorOptions(graph.Group())...)
	if err != nil {
		return fmt.Errorf("%s: %w", graph.Group(), err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if proc.WaitForReadyContext(ctx) == nil && onReady != nil {
			onReady()
		}
	}()
	err = proc.Run(ctx)
	cancel()
	<-done
	if err != nil {
		return fmt.Errorf("%s: %w", graph.Group(), err)
	}
	return nil
}

// ReplayGroup rebuilds the table and outputs of the group of graph from its
// input streams (Replay.Run): it empties the group's state and runs a
// processor of graph until it has committed every message that was in its
// inputs when the replay began. The table topic is recreated with its
// configs from the catalogue. The group must not be running.
func ReplayGroup(ctx context.Context, s Config, graph func() *goka.GroupGraph, partitions int32, replication int16) error {
	if err := s.Validate(); err != nil {
		return err
	}
	g := graph()
	table := g.GroupTable().Topic()
	spec := Replay{Group: string(g.Group()), Table: table, TableConfigs: topics.Find(table, partitions).Configs(),
		Partitions: partitions, Replication: replication, StateDir: s.StateDirOf(string(g.Group())),
		AllowGaps: s.AllowGaps, Logger: s.Logger}
	for _, e := range g.InputStreams() {
		spec.Inputs = append(spec.Inputs, e.Topic())
	}
	s = spec.For(s)
	cl, err := NewClient(s.Brokers, kgo.ClientID("offerlog-replay"))
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer cl.Close()
	return spec.Run(ctx, kadm.NewClient(cl), func(ctx context.Context) error {
		return RunProcessor(ctx, s, graph(), nil)
	})
}
