package serving_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/topics"
)

// TestAShardOnDisk: a server given a directory (ServerConfig.Dir) keeps its
// shard in a Pebble store there, not in memory, and answers from it, the
// table's later changes and deletions included; a store left from before
// is emptied, not trusted.
func TestAShardOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: table, Partitions: 4, Compacted: true}})
	kv := map[string]string{}
	for i := range 200 {
		kv[fmt.Sprintf("k%03d", i)] = fmt.Sprintf("v%d", i)
	}
	produce(t, b.Addrs(), kv)
	dir := filepath.Join(t.TempDir(), "archive")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "left-from-before"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := serving.NewServer(serving.ServerConfig{Cluster: testkit.Cluster(t, b.Addrs()), Table: table, Shards: 1, DC: "dc1", Host: "h1",
		Owner: serving.Static{Shard: 0}, Dir: dir, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	testkit.Eventually(t, time.Minute, "the shard loaded", srv.Ready)
	if _, err := os.Stat(filepath.Join(dir, "left-from-before")); !os.IsNotExist(err) {
		t.Errorf("a file left in the directory stayed: %v", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
		t.Fatalf("no store in %s: %v", dir, err)
	}
	if n := srv.Keys(); n != 200 {
		t.Errorf("%d keys held, want 200", n)
	}
	resp := get(t, addr, []string{"k007", "k199", "nope"})
	if !resp.AllMatched || len(resp.Entries) != 3 || string(resp.Entries[0].Value) != "v7" || string(resp.Entries[1].Value) != "v199" || resp.Entries[2].Found {
		t.Fatalf("answers %v", resp.Entries)
	}
	testkit.Put(t, b.Addrs(), table, []byte("k007"), []byte("seven"))
	testkit.Put(t, b.Addrs(), table, []byte("k199"), nil)
	testkit.Eventually(t, time.Minute, "the changes applied", func() bool {
		r := get(t, addr, []string{"k007", "k199"})
		return string(r.Entries[0].Value) == "seven" && !r.Entries[1].Found
	})
	if n := srv.Keys(); n != 199 {
		t.Errorf("%d keys held after a deletion, want 199", n)
	}
}
