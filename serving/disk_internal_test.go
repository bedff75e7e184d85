package serving

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams/table"
)

// TestADiskStoreThatCannotBeReadSaysSo: a disk store whose table files
// are corrupt answers an error, not "not found" (the server then answers
// Unavailable, and a client asks another server): it answered every key
// absent, so that the cache told a client an archived offer did not exist.
func TestADiskStoreThatCannotBeReadSaysSo(t *testing.T) {
	dir := t.TempDir()
	d, err := newDiskStore(dir, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := d.Set(fmt.Sprintf("k%04d", i), bytes.Repeat([]byte{byte(i)}, 300)); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok, err := d.Get("k0500"); err != nil || !ok || len(v) != 300 {
		t.Fatalf("before: %d bytes, %v, %v", len(v), ok, err)
	}
	if _, ok, err := d.Get("absent"); ok || err != nil {
		t.Fatalf("an absent key: %v, %v", ok, err)
	}
	if err := d.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.db.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("no table files in %s: %v", dir, err)
	}
	for _, f := range ssts {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The data blocks come first; the index and footer stay readable.
		for i := range len(data) / 2 {
			data[i] ^= 0xff
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if d.db, err = table.OpenPebble(dir, diskMemory, nil, false, testkit.Logger()); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v, ok, err := d.Get("k0500"); err == nil {
		t.Errorf("a corrupt store answered %d bytes, found %v, without an error", len(v), ok)
	}
	live := d.Len()
	if err := d.Set("k0500", []byte("new")); err == nil {
		t.Error("a Set over a key the store cannot read succeeded")
	}
	if d.Len() != live {
		t.Errorf("Len moved from %d to %d on a failed Set", live, d.Len())
	}
}
