package table

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/replay"
)

// Config is what every table group and view of one cluster shares. Build
// it once and pass it by value.
type Config struct {
	// Cluster is the cluster the groups and views read and write.
	Cluster *streams.Cluster
	// StateDir holds the local table stores. It belongs to the cluster:
	// keep it beside the cluster's data, never in a directory shared with
	// another cluster's state.
	StateDir string
	// Replication of the topics a replay recreates; catalogue topics are
	// created by package topics beforehand.
	Replication int
	// AllowGaps makes replays rebuild from what retention left of their
	// inputs instead of refusing (Replay.AllowGaps).
	AllowGaps bool
	// Replaying is what a processor run by a replay does with the outputs
	// of input records the group had processed (replay.Outputs); the zero
	// value is a live processor.
	Replaying replay.Outputs
	// ReemitOnly limits a Reemit replay to these output topics
	// (replay.Spec.ReemitOnly).
	ReemitOnly []string
	// replay is set by Replay on the config of the processor a replay
	// runs.
	replay *replay.Emits
	// StoreMemory is the memory one local table store (one partition of
	// one table or view, Pebble) may take for its memtables and block
	// cache (default DefaultStoreMemory). Every store of a process gets the
	// same share of the process's budget (--memory).
	StoreMemory int64
	// Cache is the block cache every local store of the process shares,
	// which the process makes and closes: the platform's is what the
	// stores' memtables leave of their budget (CacheMemoryOf). nil: each
	// store has a cache of its own share (a tool, a test).
	Cache *BlockCache
	// Standby makes every member of a table group keep a warm copy of the
	// partitions it does not own (Kafka Streams' standby replicas, for
	// every partition): it follows their changelogs into its local stores,
	// so that taking a partition over (a member gone, a rebalance) reads
	// only the changelog's tail, not the whole partition. It costs every
	// member the disk of the whole table and the reading of every
	// partition's changelog.
	Standby bool
	// OnView, if set, is given every view RunView runs before it starts
	// (the platform sets its StuckAfter and watches its staleness for
	// /readyz and its metric); RunView calls what it returns once the view
	// has stopped.
	OnView func(name string, v *View) (remove func())
	// Logger receives the stores' log lines.
	Logger *slog.Logger
}

// DefaultStoreMemory is a store's memory when its Config names none.
const DefaultStoreMemory = 8 << 20

// Validate returns every problem of c joined, or nil.
func (c Config) Validate() error {
	var errs []error
	if c.Cluster == nil {
		errs = append(errs, errors.New("table: no cluster"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("table: no state directory"))
	}
	if c.Replication < 1 {
		errs = append(errs, fmt.Errorf("table: replication %d < 1", c.Replication))
	}
	return errors.Join(errs...)
}

// StoreMemoryOf returns each store's share of a process's memory budget
// given to its local table stores, for partitions partitions of tables
// tables and views.
func StoreMemoryOf(budget int64, tables, partitions int) int64 {
	if budget <= 0 || tables <= 0 || partitions <= 0 {
		return DefaultStoreMemory
	}
	return budget / int64(tables*partitions)
}

// CacheMemoryOf returns the block cache of a process whose local stores
// share budget (as StoreMemoryOf's): what their memtables, two a store,
// leave of it; 0 (the default) without a budget.
func CacheMemoryOf(budget int64, tables, partitions int) int64 {
	if budget <= 0 || tables <= 0 || partitions <= 0 {
		return 0
	}
	_, memtable := pebbleMemory(StoreMemoryOf(budget, tables, partitions))
	n := int64(tables * partitions)
	return max(budget-2*memtable*n, n*(512<<10))
}

// StateDirOf returns the local storage directory of a processor group, as
// Config.ProcessorOptions lays it out.
func (c Config) StateDirOf(group string) string {
	return filepath.Join(c.StateDir, "processor", group)
}

// Replay rebuilds a table group from its inputs (replay.Spec.Run), the one
// way every group is replayed: spec names the group, its inputs, its table
// and the table's configs and partitions; the group's local state, the gap
// rule and the logger come from s. run runs the group with the config the
// replay made of s (its outputs dropped or marked), until its context ends.
// The group must not be running.
func Replay(ctx context.Context, s Config, spec replay.Spec, run func(context.Context, Config) error) error {
	if err := s.Validate(); err != nil {
		return err
	}
	spec.StateDir, spec.AllowGaps, spec.Logger = s.StateDirOf(spec.Group), s.AllowGaps, s.Logger
	spec.ReemitOnly, spec.Forget = s.ReemitOnly, s.Cluster.Forget
	s.replay = spec.Start(s.Replaying)
	return spec.Run(ctx, s.Cluster.Admin(), func(ctx context.Context) error { return run(ctx, s) })
}
