package numerator

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Version is the version of a numerator state, T.S.V.G:
//   - T, the type of state (collection): one per market, vertical...;
//   - S, the sharding scheme;
//   - V, the rebuild version, raised by every rebuild (compaction);
//   - G, the generation, raised whenever new doc_ids are added.
type Version struct {
	T, S, V, G int64
}

// String returns "T.S.V.G".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d.%d", v.T, v.S, v.V, v.G) }

// ParseVersion parses "T.S.V.G" of four non-negative integers.
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return Version{}, fmt.Errorf("numerator: version %q: want T.S.V.G", s)
	}
	var n [4]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil || x < 0 {
			return Version{}, fmt.Errorf("numerator: version %q: part %d is not a non-negative integer", s, i+1)
		}
		n[i] = x
	}
	return Version{T: n[0], S: n[1], V: n[2], G: n[3]}, nil
}

// Usable reports whether data built on state version data can be used with
// a state of version state: the same type, sharding scheme and rebuild
// version, and a state generation at least the data's (doc_ids are
// persistent between rebuilds, so a newer generation only adds ids). In
// every other case the doc_ids of the data may mean other offers.
func Usable(data, state Version) bool { return Compatible(data, state) == nil }

// Compatible returns nil if data built on state version data can be used
// with a state of version state (Usable), or says why not.
func Compatible(data, state Version) error {
	switch {
	case data.T != state.T:
		return fmt.Errorf("numerator: data %s is of state type %d, the state %s of type %d", data, data.T, state, state.T)
	case data.S != state.S:
		return fmt.Errorf("numerator: data %s is of sharding scheme %d, the state %s of scheme %d: shards differ", data, data.S, state, state.S)
	case data.V != state.V:
		return fmt.Errorf("numerator: data %s is of rebuild %d, the state %s of rebuild %d: doc_ids were renumbered", data, data.V, state, state.V)
	case state.G < data.G:
		return fmt.Errorf("numerator: the state %s is older than the data %s: the data may name doc_ids the state does not have", state, data)
	}
	return nil
}

// CompatibleWith is Compatible against a state's record: stricter than the
// seed's rule, it also refuses data older than the state's last reuse of a
// doc_id (LastReuse), which the data may name for the key that held it.
func CompatibleWith(data Version, state *schemas.NumeratorState) error {
	sv, err := ParseVersion(state.Version)
	if err != nil {
		return err
	}
	if err := Compatible(data, sv); err != nil {
		return err
	}
	if state.LastReuse > data.G {
		return fmt.Errorf("numerator: the state %s gave doc_ids other keys held to new keys at G %d, after the data's %s: the data may name one of them for its former key",
			state.Version, state.LastReuse, data)
	}
	return nil
}

// StateOf returns the newest valid state of version v among states
// (oldest first), and false if none is: a state named by a later record
// of the same version and ticket with Invalid set was declared invalid.
func StateOf(states []schemas.NumeratorState, v string) (*schemas.NumeratorState, bool) {
	invalid := map[int64]bool{}
	for i := len(states) - 1; i >= 0; i-- {
		switch {
		case states[i].Version != v:
		case states[i].Invalid != "":
			invalid[states[i].Ticket] = true
		case !invalid[states[i].Ticket]:
			return &states[i], true
		}
	}
	return nil, false
}

// States returns every record of numerator.states that decodes, oldest
// first: the states, and the builds refused (Invalid set).
func States(ctx context.Context, c *streams.Cluster) ([]schemas.NumeratorState, error) {
	var out []schemas.NumeratorState
	err := streams.ReadToEnd(ctx, c, topics.NumeratorStates, func(r *kgo.Record) {
		var st schemas.NumeratorState
		if schemas.NumeratorStates.Decode(r.Value, &st) == nil {
			out = append(out, st)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", topics.NumeratorStates, err)
	}
	return out, nil
}
