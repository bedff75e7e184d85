package gokaceiling

import (
	"log/slog"
	"testing"

	"github.com/offerlog/offerlog/streams/table"
)

// TestPebbleStoreIsAGokaStorage: values, deletes, the offset (not listed by
// iterators), ranges, and what a closed store keeps.
func TestPebbleStoreIsAGokaStorage(t *testing.T) {
	dir := t.TempDir()
	build := PebbleBuilder(dir, table.DefaultStoreMemory, slog.Default())
	st, err := build("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/1", "a/2", "b/1"} {
		if err := st.Set(k, []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets are written to the store once every offsetEvery, and on
	// Close: the store answers the last one set either way.
	for o := int64(41 - offsetEvery - 3); o <= 41; o++ {
		if err := st.SetOffset(o); err != nil {
			t.Fatal(err)
		}
	}
	if off, err := st.GetOffset(-2); err != nil || off != 41 {
		t.Fatalf("offset %d %v after setting 41", off, err)
	}
	if err := st.Delete("a/2"); err != nil {
		t.Fatal(err)
	}
	keys := func(start, limit string) []string {
		var s, l []byte
		if start != "" {
			s, l = []byte(start), []byte(limit)
		}
		it, err := st.IteratorWithRange(s, l)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Release()
		var out []string
		for it.Next() {
			v, _ := it.Value()
			out = append(out, string(it.Key())+"="+string(v))
		}
		return out
	}
	if got := keys("", ""); len(got) != 2 || got[0] != "a/1=va/1" || got[1] != "b/1=vb/1" {
		t.Fatalf("all: %v (the offset must not be listed)", got)
	}
	if got := keys("a/", "a0"); len(got) != 1 || got[0] != "a/1=va/1" {
		t.Fatalf("range a/: %v", got)
	}
	it, _ := st.Iterator()
	if !it.Seek([]byte("b")) || !it.Next() || string(it.Key()) != "b/1" {
		t.Fatalf("Seek then Next does not land on b/1")
	}
	it.Release()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = build("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.Get("b/1")
	off, oerr := st.GetOffset(-2)
	has, herr := st.Has("a/2")
	if err != nil || string(v) != "vb/1" || oerr != nil || off != 41 || herr != nil || has {
		t.Fatalf("after reopening: %q %v, offset %d %v, a/2 %v %v", v, err, off, oerr, has, herr)
	}
	if off, _ := func() (int64, error) { s, _ := build("other", 0); defer s.Close(); return s.GetOffset(-2) }(); off != -2 {
		t.Fatalf("a new store's offset %d, want the default", off)
	}
}
