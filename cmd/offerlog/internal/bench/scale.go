package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// scaleMembers are the numbers of members of each pipeline group the scale
// scenario runs.
var scaleMembers = []int{1, 2, 4}

// runScale runs the document pipeline over the same backlog with 1, 2 and
// 4 members of each of its groups (registry, indexer): each member has its
// own clients, epoch catalogue and local stores, as a process of
// `offerlog run registry` and `offerlog run indexer` would, and the group
// shares the partitions out among them. Each run has a broker of its own,
// so that every run starts from the same empty groups, and its backlog is
// written once every member has joined (so no rebalance falls inside the
// span; the members process it while it is written). The result is the
// one-member run; the others say their ratio to it.
func runScale(ctx context.Context, env *Env) (Result, error) {
	var results []Result
	for _, members := range scaleMembers {
		r, err := scaleRun(ctx, env, members)
		if err != nil {
			return Result{}, fmt.Errorf("%d members: %w", members, err)
		}
		r.Name = fmt.Sprintf("%d-members", members)
		if len(results) > 0 {
			r.Note = fmt.Sprintf("%d members of each group: %.2f× the throughput of one; ", members, r.Rate()/results[0].Rate())
		}
		r.Note += fmt.Sprintf("%.0f µs of CPU per document (the process's user and system time while the backlog was processed, "+
			"the broker's and the writing of the backlog included; over the span timed, %.2f of the machine's %d cores)", r.cpuPerDoc.Seconds()*1e6, r.busy, runtime.NumCPU())
		results = append(results, r)
	}
	first := results[0]
	first.Also = results[1:]
	first.Note = first.Note + "; " + fmt.Sprintf("the pipeline's backlog of %d documents over %d partitions with one member of each group, "+
		"from the registry's first verdict to the indexer's last search feed record; then with %v members, "+
		"each on a broker of its own, the backlog written once every member has joined, all in this process and on these cores", env.Docs, env.Partitions, scaleMembers[1:])
	return first, nil
}

// scaleRun times the pipeline's backlog with members members of each
// group, on a broker of its own.
func scaleRun(ctx context.Context, env *Env, members int) (Result, error) {
	dir := filepath.Join(env.StateDir, fmt.Sprint(members))
	own, stop, err := onOwnBroker(ctx, env, dir, topics.ForClient(client, env.Partitions)...)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	kafka := own.Cluster
	data, err := schemas.EpochSchemas.Encode(epochSchema())
	if err != nil {
		return Result{}, err
	}
	cl, err := kafka.Producer("bench-epochs")
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.Epochs, Key: []byte(client + "/1"), Value: data}).FirstErr(); err != nil {
		return Result{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	errc := make(chan error, 3*members)
	for m := range members {
		scfg := table.Config{Cluster: own.Cluster, StateDir: filepath.Join(dir, fmt.Sprint("member-", m)), Replication: 1, Logger: env.Logger}
		epochs := registry.NewCatalogue(registry.DefaultEpochGrace)
		wg.Add(3)
		go func() { defer wg.Done(); errc <- epochs.Follow(runCtx, own.Cluster, env.Logger) }()
		go func() {
			defer wg.Done()
			errc <- registry.Run(runCtx, registry.Config{Streams: scfg, Rules: registry.DefaultRules(), Epochs: epochs, Logger: env.Logger})
		}()
		go func() {
			defer wg.Done()
			errc <- indexer.Run(runCtx, indexer.Config{Cluster: own.Cluster, Partitions: env.Partitions, Replication: -1, Logger: env.Logger})
		}()
	}
	// The backlog is written once every member has joined both groups:
	// the run measures the groups at that size, not their rebalances.
	if err := joined(runCtx, own.Admin, members, errc, string(registry.Group), indexer.Group); err != nil {
		return Result{}, err
	}
	cpu0 := cpuTime()
	if err := writeDocs(ctx, own.Brokers, topics.DocumentsIngest, env.Docs, 0); err != nil {
		return Result{}, err
	}
	select {
	case err := <-indexedAsync(runCtx, own, int64(env.Docs)):
		if err != nil {
			return Result{}, err
		}
	case err := <-errc:
		return Result{}, fmt.Errorf("a member stopped: %w", err)
	}
	cpu := cpuTime() - cpu0
	d, err := spanOf(ctx, own, topics.DocumentsResults, topics.SaasTopic(client))
	if err != nil {
		return Result{}, err
	}
	return Result{Records: env.Docs, Duration: d, cpuPerDoc: cpu / time.Duration(env.Docs), busy: cpu.Seconds() / d.Seconds()}, nil
}

// cpuTime returns the user and system CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// joined waits until each group is stable with members members, or a
// member stops.
func joined(ctx context.Context, adm *kadm.Client, members int, errc <-chan error, groups ...string) error {
	for {
		described, err := adm.DescribeGroups(ctx, groups...)
		ready := err == nil
		for _, g := range groups {
			d, ok := described[g]
			ready = ready && ok && d.Err == nil && d.State == "Stable" && len(d.Members) == members
		}
		if ready {
			return nil
		}
		select {
		case err := <-errc:
			return fmt.Errorf("a member stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
