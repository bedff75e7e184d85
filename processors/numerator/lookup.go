package numerator

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Looked is a key's assignment under a state (Lookup).
type Looked struct {
	Key string `json:"key"`
	// State is the state asked about; Version and Generation those of the
	// state that gave the assignment (Version "": the key was never
	// numbered by then).
	State      string `json:"state"`
	Shard      int32  `json:"shard"`
	DocID      int64  `json:"doc_id"`
	Version    string `json:"version"`
	Generation int64  `json:"generation"`
	// Err says why there is no answer: the key's oldest kept assignment
	// came after the state (ErrNotKept).
	Err error `json:"-"`
}

// Errors of Lookup.
var (
	// ErrNoState: no valid state of the version is on numerator.states.
	ErrNoState = errors.New("no such state")
	// ErrNotKept: the key has changed more than HistoryKept times since
	// the state: what the state gave it is no longer kept.
	ErrNotKept = errors.New("not kept")
)

// Lookup returns the assignment of each of keys under the state of
// version v (the seed: "pick the needed state among several stored"),
// from each key's record on numerator.assignments, which carries the
// assignments it held before (the last HistoryKept): the last one given by
// v or a state written before v. It reads the keys' partitions of the
// compacted topic whole (an operator's question, not a hot path).
func Lookup(ctx context.Context, c *streams.Cluster, v string, keys []string) ([]Looked, error) {
	states, err := States(ctx, c)
	if err != nil {
		return nil, err
	}
	st, ok := StateOf(states, v)
	if !ok {
		return nil, fmt.Errorf("%w %s on %s", ErrNoState, v, topics.NumeratorStates)
	}
	// order ranks each version by its first valid state on the log.
	order := map[string]int{}
	for i, s := range states {
		if _, seen := order[s.Version]; !seen && s.Invalid == "" {
			order[s.Version] = i
		}
	}
	sv, _ := ParseVersion(st.Version)
	notAfter := func(version string) bool {
		if i, ok := order[version]; ok {
			return i <= order[st.Version]
		}
		av, err := ParseVersion(version)
		return err == nil && !newer(av, sv)
	}
	n, err := streams.PartitionsOf(ctx, c.Admin(), topics.NumeratorAssignments)
	if err != nil {
		return nil, err
	}
	ends, err := streams.EndOffsets(ctx, c.Admin(), topics.NumeratorAssignments)
	if err != nil {
		return nil, err
	}
	from, to := map[int32]int64{}, map[int32]int64{}
	found := map[string]*schemas.Assignment{}
	for _, k := range keys {
		if _, err := sharding.ParseKey(k); err != nil {
			return nil, err
		}
		p := streams.Partition(k, n)
		from[p], to[p] = 0, ends[p]
		found[k] = nil
	}
	err = streams.ReadRange(ctx, c, topics.NumeratorAssignments, from, to, func(r *kgo.Record) {
		if _, asked := found[string(r.Key)]; !asked {
			return
		}
		var a schemas.Assignment
		if r.Value == nil || schemas.Assignments.Decode(r.Value, &a) != nil {
			return
		}
		found[string(r.Key)] = &a
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", topics.NumeratorAssignments, err)
	}
	out := make([]Looked, 0, len(keys))
	for _, k := range keys {
		out = append(out, lookedUp(k, st.Version, found[k], notAfter))
	}
	return out, nil
}

// lookedUp picks, of a (nil: the key was never numbered) and its
// history, the last assignment given by a version that notAfter accepts.
func lookedUp(key, state string, a *schemas.Assignment, notAfter func(version string) bool) Looked {
	l := Looked{Key: key, State: state, Shard: -1, DocID: NoDocID}
	if a == nil {
		return l
	}
	held := append(a.History, schemas.PastAssignment{Shard: a.Shard, DocID: a.DocID, Version: a.Version, Generation: a.Generation})
	for i := len(held) - 1; i >= 0; i-- {
		if h := held[i]; notAfter(h.Version) {
			l.Shard, l.DocID, l.Version, l.Generation = h.Shard, h.DocID, h.Version, h.Generation
			return l
		}
	}
	if len(a.History) < HistoryKept {
		return l // numbered after the state: none then
	}
	l.Err = fmt.Errorf("%w: key %s changed more than %d times since state %s (its oldest kept assignment is of %s)",
		ErrNotKept, key, HistoryKept, state, held[0].Version)
	return l
}
