package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// TestNumeratorWaitSaysARefusedBuild: `numerator seal --wait` exits 1 and
// says why when the state record for its marker is a refused build's, and
// 0 with the state when it is a state. A goroutine plays the sealer.
func TestNumeratorWaitSaysARefusedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), topics.Catalogue(2))
	sealer := func(invalid string, from int64) {
		ctx := testkit.Context(t, time.Minute)
		cl := testkit.Client(t, b.Addrs(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topics.NumeratorGenerations: {0: kgo.NewOffset().At(from)}}))
		fs := cl.PollRecords(ctx, 1)
		recs := fs.Records()
		if len(recs) == 0 {
			t.Errorf("no marker: %v", fs.Err())
			return
		}
		var m schemas.GenerationMarker
		if err := schemas.GenerationMarkers.Decode(recs[0].Value, &m); err != nil {
			t.Error(err)
			return
		}
		st := schemas.NumeratorState{Version: "0.0.0." + "7", Generation: m.Generation, Holder: "dc-a", Ticket: 4, Shards: []schemas.ShardSummary{},
			MarkerPartition: recs[0].Partition, MarkerOffset: recs[0].Offset, SealedAt: time.Now(), Invalid: invalid}
		data, err := schemas.NumeratorStates.Encode(&st)
		if err == nil {
			err = cl.ProduceSync(context.Background(), &kgo.Record{Topic: topics.NumeratorStates, Key: []byte("0"), Value: data}).FirstErr()
		}
		if err != nil {
			t.Error(err)
		}
	}
	for _, c := range []struct {
		invalid string
		code    int
		want    string
	}{
		{"coordinator: stale ticket: 4", 1, "refused, and left nothing: coordinator: stale ticket: 4"},
		{"", 0, "state 0.0.0.7 (generation 7, ticket 4 of dc-a)"},
	} {
		ends, err := testkit.Admin(t, b.Addrs()).ListEndOffsets(testkit.Context(t, time.Minute), topics.NumeratorGenerations)
		if err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup(topics.NumeratorGenerations, 0)
		done := make(chan struct{})
		go func() {
			defer close(done)
			sealer(c.invalid, end.Offset)
		}()
		code, out, stderr := offerlog(t, "", "numerator", "seal", "7", "--brokers", addr, "--wait", "30s")
		<-done
		if code != c.code || !strings.Contains(out+stderr, c.want) {
			t.Errorf("seal --wait with a state record %q: exit %d, %s%s; want %d and %q", c.invalid, code, out, stderr, c.code, c.want)
		}
	}
	code, out, stderr := offerlog(t, "", "numerator", "states", "--brokers", addr)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "INVALID: coordinator: stale ticket") ||
		!strings.HasPrefix(lines[1], "0.0.0.7") || strings.Contains(lines[1], "INVALID") {
		t.Errorf("numerator states: %d\n%s%s", code, out, stderr)
	}
	// check against the cluster's state record, and a state it has not.
	if code, out, stderr := offerlog(t, "", "numerator", "check", "--brokers", addr, "--state", "0.0.0.7", "--data", "0.0.0.7"); code != 0 || !strings.Contains(out, "usable") {
		t.Errorf("check against the state on the cluster: %d %s%s", code, out, stderr)
	}
	if code, _, stderr := offerlog(t, "", "numerator", "check", "--brokers", addr, "--state", "0.0.0.9", "--data", "0.0.0.7"); code != 1 || !strings.Contains(stderr, "no state 0.0.0.9") {
		t.Errorf("check against a state the cluster has not: %d %s", code, stderr)
	}
}

// TestNumeratorCheck: the seed's compatibility rule from the command line,
// exit 0 for usable, 1 with the reason otherwise, 2 for a malformed version.
func TestNumeratorCheck(t *testing.T) {
	for _, c := range []struct {
		state, data string
		code        int
		want        string
	}{
		{"3.0.1.9", "3.0.1.4", 0, "usable"},
		{"3.0.1.3", "3.0.1.4", 1, "older than the data"},
		{"3.1.1.9", "3.0.1.4", 1, "shards differ"},
		{"3.0.1", "3.0.1.4", 2, "T.S.V.G"},
	} {
		code, out, stderr := offerlog(t, "", "numerator", "check", "--state", c.state, "--data", c.data)
		if code != c.code || !strings.Contains(out+stderr, c.want) {
			t.Errorf("check --state %s --data %s: %d %s%s, want %d and %q", c.state, c.data, code, out, stderr, c.code, c.want)
		}
	}
}

// TestNumeratorShard: offerlog numerator shard says each key's shard under
// a scheme, or a state's, without a cluster; a bad key or scheme is a
// usage error naming it.
func TestNumeratorShard(t *testing.T) {
	code, out, stderr := offerlog(t, "", "numerator", "shard", "--scheme", "2", "7/sku-1/1/2", "7/sku-2/3/4")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want, _ := sharding.Place(2, "7/sku-1/1/2")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], fmt.Sprintf(`"shard":%d,"shards":16`, want.Shard)) ||
		!strings.Contains(lines[1], fmt.Sprintf(`"shard":%d`, want.Shard)) {
		t.Fatalf("shard --scheme 2: %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := offerlog(t, "", "numerator", "shard", "--state", "0.1.4.9", "7/sku-1/1/2"); code != 0 || !strings.Contains(out, `"scheme":1`) || !strings.Contains(out, `"shards":32`) {
		t.Fatalf("shard --state 0.1.4.9: %d %s", code, out)
	}
	for _, args := range [][]string{
		{"--scheme", "9", "7/sku-1/1/2"},
		{"--scheme", "0", "7/sku-1/0/2"},
		{"7/sku-1/1/2"},
		{"--scheme", "0", "--state", "0.0.1.1", "7/sku-1/1/2"},
		{"--scheme", "0"},
	} {
		if code, _, stderr := offerlog(t, "", append([]string{"numerator", "shard"}, args...)...); code != 2 || stderr == "" {
			t.Errorf("numerator shard %v: %d %s", args, code, stderr)
		}
	}
}

// TestNumeratorInvalidateAndReset: an operator's moves of the state
// pointer. The pointer names a state of another cluster (dc-a, taken for
// gone). Without --confirm, invalidate says what it would do, exits 2 and
// changes nothing; with it, dc-a's state is recorded invalid on this
// cluster's numerator.states and the pointer is back at this cluster's last
// valid state. reset then points it at this cluster's state again, with
// dc-a's next state (reported meanwhile) declared invalid.
func TestNumeratorInvalidateAndReset(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), topics.Catalogue(2))
	zkAddr := testkit.ZooKeeper(t)
	ctx := testkit.Context(t, 2*time.Minute)
	zk, err := coordinator.DialZooKeeper(ctx, zkAddr, "/offerlog/numerator/0", 0, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zk.Close)
	// This cluster's state 0.0.0.3, then dc-a's 0.0.0.4 in the pointer.
	own := schemas.NumeratorState{Version: "0.0.0.3", Generation: 3, Holder: "dc-b", Ticket: 1, Shards: []schemas.ShardSummary{},
		MarkerPartition: -1, MarkerOffset: -1, SealedAt: time.Now()}
	data, err := schemas.NumeratorStates.Encode(&own)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, b.Addrs(), topics.NumeratorStates, []byte("0"), data)
	pointer := func() coordinator.Pointer {
		t.Helper()
		p, _, err := zk.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// report reports a state of dc-a, as its master does: the
	// invalidations carried on.
	report := func(holder, version string) {
		t.Helper()
		lock, err := zk.Acquire(ctx, holder, time.Minute)
		if err == nil {
			err = zk.Report(ctx, lock.Ticket, &coordinator.Pointer{Version: version, Cluster: "dc-a:9092", Topic: topics.NumeratorStates,
				Offsets: map[int32]int64{0: 9}, Invalidated: pointer().CarryOn()})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	report("dc-a", "0.0.0.4")
	zkFlags := []string{"--brokers", addr, "--zookeeper", zkAddr}
	code, out, stderr := offerlog(t, "", append([]string{"numerator", "invalidate", "--why", "dc-a burnt down"}, zkFlags...)...)
	if code != 2 || !strings.Contains(out, "would move from state 0.0.0.4 of cluster dc-a:9092 to state 0.0.0.3 of cluster "+addr) ||
		!strings.Contains(stderr, "--confirm") || pointer().Version != "0.0.0.4" {
		t.Errorf("invalidate without --confirm: exit %d\n%s%s\npointer %+v", code, out, stderr, pointer())
	}
	code, out, stderr = offerlog(t, "", append([]string{"numerator", "invalidate", "--why", "dc-a burnt down", "--version", "0.0.0.9", "--confirm"}, zkFlags...)...)
	if code != 1 || !strings.Contains(stderr, "names state 0.0.0.4, not 0.0.0.9") {
		t.Errorf("invalidate of another version: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = offerlog(t, "", append([]string{"numerator", "invalidate", "--why", "dc-a burnt down", "--version", "0.0.0.4", "--confirm"}, zkFlags...)...)
	if p := pointer(); code != 0 || p.Version != "0.0.0.3" || p.Cluster != addr || len(p.Invalidated) != 1 || p.Invalidated[0].Version != "0.0.0.4" ||
		!strings.Contains(out, "declared invalid: declared invalid by an operator: dc-a burnt down") {
		t.Errorf("invalidate --confirm: exit %d\n%s%s\npointer %+v", code, out, stderr, p)
	}
	code, out, stderr = offerlog(t, "", "numerator", "states", "--brokers", addr)
	if code != 0 || !strings.Contains(out, "0.0.0.4") || !strings.Contains(out, "INVALID: declared invalid by operator: the state of cluster dc-a:9092") {
		t.Errorf("numerator states after invalidate: exit %d\n%s%s", code, out, stderr)
	}
	// The pointer names this cluster's own state now: not invalidated so.
	code, _, stderr = offerlog(t, "", append([]string{"numerator", "invalidate", "--why", "x", "--confirm"}, zkFlags...)...)
	if code != 1 || !strings.Contains(stderr, "this cluster's own state") {
		t.Errorf("invalidate of this cluster's own state: exit %d\n%s", code, stderr)
	}
	report("dc-a", "0.0.0.5")
	code, out, stderr = offerlog(t, "", append([]string{"numerator", "reset", "--to", "0.0.0.3", "--confirm"}, zkFlags...)...)
	if p := pointer(); code != 0 || p.Version != "0.0.0.3" || p.Cluster != addr || len(p.Invalidated) != 2 || p.Invalidated[1].Version != "0.0.0.5" {
		t.Errorf("reset --confirm: exit %d\n%s%s\npointer %+v", code, out, stderr, p)
	}
	if code, _, stderr := offerlog(t, "", "numerator", "reset", "--brokers", addr); code != 2 || !strings.Contains(stderr, "--zookeeper is required") {
		t.Errorf("reset without --zookeeper: exit %d\n%s", code, stderr)
	}
}

// TestNumeratorLookup: "numerator lookup --state V KEY" answers from the
// key's record on numerator.assignments and its history: the assignment
// of the state asked, an older one; exit 1 for a version of no state.
func TestNumeratorLookup(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), topics.Catalogue(2))
	for _, v := range []string{"0.0.0.1", "0.0.0.2"} {
		data, err := schemas.NumeratorStates.Encode(&schemas.NumeratorState{Version: v, Shards: []schemas.ShardSummary{}, SealedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		testkit.Put(t, b.Addrs(), topics.NumeratorStates, []byte("0"), data)
	}
	data, err := schemas.Assignments.Encode(&schemas.Assignment{BusinessID: 7, OfferID: "sku-1", ShopID: 1, WarehouseID: 1,
		Shard: 3, DocID: 9, Version: "0.0.0.2", Generation: 2,
		History: []schemas.PastAssignment{{Shard: 3, DocID: 4, Version: "0.0.0.1", Generation: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, b.Addrs(), topics.NumeratorAssignments, []byte("7/sku-1/1/1"), data)
	for _, c := range []struct {
		state, want string
	}{
		{"0.0.0.1", `{"key":"7/sku-1/1/1","state":"0.0.0.1","shard":3,"doc_id":4,"version":"0.0.0.1","generation":1}`},
		{"0.0.0.2", `{"key":"7/sku-1/1/1","state":"0.0.0.2","shard":3,"doc_id":9,"version":"0.0.0.2","generation":2}`},
	} {
		code, out, stderr := offerlog(t, "", "numerator", "lookup", "--brokers", addr, "--state", c.state, "7/sku-1/1/1")
		if code != 0 || strings.TrimSpace(out) != c.want {
			t.Errorf("lookup --state %s: exit %d\n%s%s\nwant %s", c.state, code, out, stderr, c.want)
		}
	}
	if code, _, stderr := offerlog(t, "", "numerator", "lookup", "--brokers", addr, "--state", "0.0.0.5", "7/sku-1/1/1"); code != 1 || !strings.Contains(stderr, "no such state 0.0.0.5") {
		t.Errorf("lookup of a version of no state: exit %d\n%s", code, stderr)
	}
	if code, _, _ := offerlog(t, "", "numerator", "lookup", "--brokers", addr, "--state", "0.0.0.1", "7/sku-1"); code != 2 {
		t.Errorf("lookup of a bad key: exit %d, want 2", code)
	}
}
