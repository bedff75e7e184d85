package numerator

import (
	"fmt"
	"strconv"
	"strings"
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
func Usable(data, state Version) bool {
	return data.T == state.T && data.S == state.S && data.V == state.V && state.G >= data.G
}
