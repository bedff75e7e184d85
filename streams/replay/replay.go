// Package replay rebuilds a processor group from its inputs: it waits
// until the group runs alone, checks that the inputs hold their whole
// history, wipes the group's table and local state, runs the group until
// it has committed every input record that was there when the replay
// began, and reports what it did with the outputs already written.
package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrGroupRunning is returned by PrepareReplay when the group has members:
// a replay rebuilds the group's state from scratch and must run alone.
// A replay waits Spec.MemberGrace for members to go first: the member of
// a process killed without leaving stays until its session expires.
var ErrGroupRunning = errors.New("group has running members; stop them before replaying")

// DefaultMemberGrace is Spec.MemberGrace's default: a member of a process
// killed a moment ago leaves when its session expires (10 s for offerlog's
// consumers).
const DefaultMemberGrace = 15 * time.Second

// waitAlone waits up to grace until the group has no members, or returns
// ErrGroupRunning.
func (r Spec) waitAlone(ctx context.Context, adm *kadm.Client, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for {
		groups, err := adm.DescribeGroups(ctx, r.Group)
		if err != nil {
			return fmt.Errorf("replay %s: describe group: %w", r.Group, err)
		}
		g, ok := groups[r.Group]
		if !ok || len(g.Members) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replay %s: %d member(s) after %v: %w", r.Group, len(g.Members), grace, ErrGroupRunning)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replay %s: %w", r.Group, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Spec describes how to rebuild one processor group from its inputs.
type Spec struct {
	// Group is the consumer group name.
	Group string
	// Inputs are the topics the group consumes.
	Inputs []string
	// Table is the group's changelog topic, "" for a group without a table.
	Table topics.Table
	// TableConfigs are the topic configs to recreate Table with.
	TableConfigs map[string]string
	// Partitions of Table.
	Partitions int32
	// Replication of Table; -1 takes the broker default.
	Replication int16
	// StateDir is the group's local storage, wiped; "" for none.
	StateDir string
	// AllowGaps replays what retention left of the inputs. Without it a
	// replay refuses to start when an input no longer begins at offset 0:
	// it would rebuild the table from a part of the history, silently.
	AllowGaps bool
	// Outputs is what the replay does with outputs already written, for
	// its report when the processor is not configured by For (the
	// indexer's re-delivery).
	Outputs Outputs
	// ReemitOnly, if not empty, limits a Reemit to these output topics
	// (a repartition regenerates cabinet.changes alone, whose records
	// name the positions of the aggregate's input); the others are
	// dropped as TablesOnly drops them.
	ReemitOnly []string
	// MemberGrace is how long the replay waits for the group's members to
	// go before it refuses to run (0: DefaultMemberGrace).
	MemberGrace time.Duration
	// Forget, if set, is told the topics Prepare made again, for clients
	// that cache what they know of topics (streams.Cluster.Forget).
	Forget func(topics ...string)
	// emits is shared with the processor Start configured.
	emits *Emits
	// Logger receives the replay's progress (every second), warnings and its
	// report at the end.
	Logger *slog.Logger
}

// ErrPartialHistory is returned by Prepare when an input lost its first
// records to retention (or DeleteRecords) and AllowGaps is not set.
var ErrPartialHistory = errors.New("an input no longer holds its whole history")

// Start returns what the processor the replay runs needs to know (which
// records' outputs to drop or mark), for its outputs mode: hand it to the
// processor's config before Run.
func (r *Spec) Start(mode Outputs) *Emits {
	if mode == Live {
		mode = TablesOnly
	}
	r.emits = newEmits(mode, r.Inputs)
	r.emits.only = slices.Clone(r.ReemitOnly)
	return r.emits
}

// checkWhole returns an ErrPartialHistory error naming every input
// partition that does not start at offset 0.
func (r Spec) checkWhole(ctx context.Context, adm *kadm.Client) error {
	starts, err := adm.ListStartOffsets(ctx, r.Inputs...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("replay %s: start offsets: %w", r.Group, err)
	}
	var lost []string
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			lost = append(lost, fmt.Sprintf("%s partition %d: offsets 0 to %d are gone (first missing 0, first kept %d)",
				o.Topic, o.Partition, o.Offset-1, o.Offset))
		}
	})
	if len(lost) == 0 {
		return nil
	}
	sort.Strings(lost)
	if r.AllowGaps {
		r.log().Warn("replay: rebuilding from a part of the history, as --allow-gaps asks", "group", r.Group, "lost", lost)
		return nil
	}
	return fmt.Errorf("replay %s: %w: %s (removed by retention or DeleteRecords); --allow-gaps replays what is left",
		r.Group, ErrPartialHistory, strings.Join(lost, ", "))
}

func (r Spec) log() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

// Prepare empties the group's state so that the next run starts from the
// first offset of every input with an empty table: it checks that the group
// has no members, records the end offsets of the inputs (the point the replay
// must reach), deletes the group's committed offsets, recreates the table
// topic empty and wipes the local storage. It returns the end offsets.
func (r Spec) Prepare(ctx context.Context, adm *kadm.Client) (kadm.Offsets, error) {
	grace := r.MemberGrace
	if grace <= 0 {
		grace = DefaultMemberGrace
	}
	if err := r.waitAlone(ctx, adm, grace); err != nil {
		return nil, err
	}
	if err := r.checkWhole(ctx, adm); err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, r.Inputs...)
	if err != nil {
		return nil, fmt.Errorf("replay %s: end offsets: %w", r.Group, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("replay %s: end offsets: %w", r.Group, err)
	}
	if r.emits != nil {
		// What the group had processed: those records' outputs exist.
		committed, err := adm.FetchOffsets(ctx, r.Group)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("replay %s: committed offsets: %w", r.Group, err)
		}
		r.emits.answered = committed
	}
	if _, err := adm.DeleteGroup(ctx, r.Group); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("replay %s: delete committed offsets: %w", r.Group, err)
	}
	if r.Table != "" {
		if err := Recreate(ctx, adm, string(r.Table), r.Partitions, r.Replication, r.TableConfigs); err != nil {
			return nil, fmt.Errorf("replay %s: %w", r.Group, err)
		}
		if r.Forget != nil {
			r.Forget(string(r.Table))
		}
	}
	if r.StateDir != "" {
		if err := os.RemoveAll(r.StateDir); err != nil {
			return nil, fmt.Errorf("replay %s: wipe local state: %w", r.Group, err)
		}
	}
	return ends.Offsets(), nil
}

// Recreate deletes topic and makes it again, empty, with partitions
// partitions and configs; on a real cluster, which deletes
// asynchronously, it retries the creation until the old topic is gone.
func Recreate(ctx context.Context, adm *kadm.Client, topic string, partitions int32, replication int16, configs map[string]string) error {
	resp, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("delete %s: %w", topic, err)
	}
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	// A real cluster deletes asynchronously: retry while the old topic is
	// still being removed.
	for {
		resp, err := adm.CreateTopics(ctx, partitions, replication, cfg, topic)
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create %s: %w", topic, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Run rebuilds the group: Prepare, then run (the group's processor, which
// must stop when its ctx ends) until the group has committed every input
// message that was there when the replay began; then it stops run and
// returns run's error, or the error that ended the replay early.
func (r Spec) Run(ctx context.Context, adm *kadm.Client, run func(context.Context) error) error {
	ends, err := r.Prepare(ctx, adm)
	if err != nil {
		return err
	}
	start := time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- run(runCtx) }()
	waited := make(chan error, 1)
	go func() { waited <- streams.WaitCommitted(runCtx, adm, r.Group, ends) }()
	progressDone := make(chan struct{})
	defer func() { cancel(); <-progressDone }()
	go func() {
		defer close(progressDone)
		r.progress(runCtx, adm, ends)
	}()
	select {
	case err := <-waited:
		cancel()
		if runErr := <-errc; err == nil {
			err = runErr
		}
		if err != nil {
			return fmt.Errorf("replay %s: %w", r.Group, err)
		}
		r.report(ctx, adm, ends, time.Since(start), r.Outputs)
		return nil
	case err := <-errc:
		if err == nil {
			err = errors.New("stopped before it caught up")
		}
		return fmt.Errorf("replay %s: %w", r.Group, err)
	}
}

// progress logs, every second until ctx ends, how many of the input
// records the replay must reach (the end offsets recorded at its start) the
// group has committed, at what rate, and when at that rate it will be done;
// once, why it cannot tell.
func (r Spec) progress(ctx context.Context, adm *kadm.Client, ends kadm.Offsets) {
	start := time.Now()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	told := false
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		done, total, err := r.committed(ctx, adm, ends)
		if err != nil {
			if !told && ctx.Err() == nil {
				told = true
				r.log().Warn("replay: progress unknown (the group's offsets cannot be read)", "group", r.Group, "err", err)
			}
			continue
		}
		elapsed := time.Since(start)
		rate := float64(done) / elapsed.Seconds()
		eta := "unknown"
		if rate > 0 {
			eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
		}
		r.log().Info("replay: progress", "group", r.Group, "records", done, "of", total,
			"percent", fmt.Sprintf("%.1f", 100*float64(done)/float64(max(total, 1))),
			"rate", fmt.Sprintf("%.0f/s", rate), "eta", eta, "elapsed", elapsed.Round(time.Second))
	}
}

// committed returns how many of the input records up to ends the group has
// committed, and how many there are. A group that does not exist yet (the
// replay's first moments: it starts the group anew) has committed none.
func (r Spec) committed(ctx context.Context, adm *kadm.Client, ends kadm.Offsets) (done, total int64, err error) {
	committed, err := adm.FetchOffsets(ctx, r.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = kadm.OffsetResponses{}, nil
	}
	if err != nil {
		return 0, 0, err
	}
	ends.Each(func(o kadm.Offset) {
		total += max(o.At, 0)
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.Err == nil {
			done += min(max(c.At, 0), max(o.At, 0))
		}
	})
	return done, total, nil
}

// report logs what the replay rebuilt: the input records it processed, at
// what rate, and the records of the table it wrote.
func (r Spec) report(ctx context.Context, adm *kadm.Client, ends kadm.Offsets, elapsed time.Duration, outputs Outputs) {
	_, total, _ := r.committed(ctx, adm, ends)
	args := []any{"group", r.Group, "input_records", total, "inputs", strings.Join(r.Inputs, ","),
		"elapsed", elapsed.Round(time.Millisecond), "rate", fmt.Sprintf("%.0f/s", float64(total)/max(elapsed.Seconds(), 1e-3))}
	if r.Table != "" {
		var records int64
		if tableEnds, err := adm.ListEndOffsets(ctx, string(r.Table)); err == nil {
			tableEnds.Each(func(o kadm.ListedOffset) { records += max(o.Offset, 0) })
		}
		args = append(args, "table", r.Table, "table_records", records)
	}
	if r.StateDir != "" {
		args = append(args, "local_state", r.StateDir)
	}
	if r.emits != nil {
		outputs = r.emits.mode
		args = append(args, "outputs_of_new_records", r.emits.live.Load(), "outputs_dropped", r.emits.dropped.Load(),
			"outputs_reemitted", r.emits.marked.Load())
	}
	args = append(args, "outputs", outputs.String())
	r.log().Info("replay: done", args...)
}
