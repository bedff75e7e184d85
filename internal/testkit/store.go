package testkit

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/offerlog/offerlog/internal/table"
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
		db, err := table.OpenPebble(dir, 1<<20, 0, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if k := it.Key(); string(k) != "__offset" && k[0] != 0 { // the store's own keys
				out[string(it.Key())] = bytes.Clone(it.Value())
			}
		}
		if err := errors.Join(it.Close(), table.ClosePebble(db)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
