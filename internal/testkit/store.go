package testkit

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/streams/table"
)

// LocalTable reads every local store of topic that group keeps under
// stateDir (table.Group's layout, which was goka's) into key -> value,
// without the stores' own keys (their changelog and input offsets). The group must be stopped.
func LocalTable(t testing.TB, stateDir, group, topic string) map[string][]byte {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(stateDir, "processor", group, "pebble", topic+".*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no local store of %s under %s (%v)", topic, stateDir, err)
	}
	out := map[string][]byte{}
	for _, dir := range dirs {
		eachStored(t, dir, func(k string, v []byte) {
			if k != "__offset" && k[0] != 0 { // the store's own keys
				out[k] = bytes.Clone(v)
			}
		})
	}
	return out
}

// eachStored calls fn with every key and value of the local store in dir,
// in key order; the store must not be open elsewhere. v is valid only
// during the call.
func eachStored(t testing.TB, dir string, fn func(k string, v []byte)) {
	t.Helper()
	db, err := table.OpenPebble(dir, 1<<20, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		fn(string(it.Key()), it.Value())
	}
	if err := errors.Join(it.Close(), db.Close()); err != nil {
		t.Fatal(err)
	}
}

// A ViewStore is what a table.View's local store holds: the topic it
// copies, the next offset to read of each partition, and its values.
type ViewStore struct {
	Topic  string
	Next   map[int32]int64
	Values map[string][]byte
}

// ReadViewStore reads the store of a view (table.View.Dir) that no process
// has open.
func ReadViewStore(t testing.TB, dir string) ViewStore {
	t.Helper()
	vs := ViewStore{Next: map[int32]int64{}, Values: map[string][]byte{}}
	eachStored(t, dir, func(k string, v []byte) {
		switch {
		case k == "\x00view/topic":
			vs.Topic = string(v)
		case strings.HasPrefix(k, "\x00view/next/"):
			p, err1 := strconv.ParseInt(strings.TrimPrefix(k, "\x00view/next/"), 10, 32)
			n, err2 := strconv.ParseInt(string(v), 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatalf("%s: %q = %q: %v", dir, k, v, err)
			}
			vs.Next[int32(p)] = n
		case k[0] != 0 && k != "__offset":
			vs.Values[k] = bytes.Clone(v)
		}
	})
	return vs
}

// SameAsTheLog checks that a view's store is its topic (records: every
// record it still holds, in order, as ReadAll reads them) up to the
// store's offsets: each key that has no record at or after its
// partition's offset holds its last value before it (none for a
// tombstone), and each key that has one holds nothing or a value the key
// had before it (compaction keeps only a key's last record, so which one
// is not known). It returns how many keys it compared.
func SameAsTheLog(t testing.TB, name string, vs ViewStore, records []*kgo.Record) int {
	t.Helper()
	last := map[string][]byte{}     // key -> last value before its partition's offset
	before := map[string][][]byte{} // key -> every value before it
	after := map[string]bool{}      // keys with a record at or after it
	for _, r := range records {
		k := string(r.Key)
		if r.Offset >= vs.Next[r.Partition] {
			after[k] = true
			continue
		}
		last[k] = r.Value
		before[k] = append(before[k], r.Value)
	}
	n := 0
	for k, want := range last {
		if after[k] {
			continue
		}
		n++
		if got, ok := vs.Values[k]; !bytes.Equal(got, want) || ok != (want != nil) {
			t.Errorf("view %s of %s: %q is %q, the log's last value before the view's offset %q", name, vs.Topic, k, got, want)
		}
	}
	for k, got := range vs.Values {
		if _, ok := last[k]; !ok && !after[k] {
			t.Errorf("view %s of %s: %q is %q, the log never held it", name, vs.Topic, k, got)
			continue
		}
		if after[k] && len(before[k]) > 0 && !slices.ContainsFunc(before[k], func(v []byte) bool { return bytes.Equal(v, got) }) {
			t.Errorf("view %s of %s: %q is %q, no value the log held for it before the view's offset", name, vs.Topic, k, got)
		}
	}
	return n
}
