package registry

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// TestTheGroupDecidesInMemory runs the registry's own table group, its
// handler and table, on the in-memory tester (no broker): a version is
// accepted and changes the feed, an older one is stale, the records seen
// again (as after a crash) are answered from what the key's record
// remembers (the accepted one's change emitted again, at least once: it
// may not have been written before the crash), and the table holds the
// freshest version.
func TestTheGroupDecidesInMemory(t *testing.T) {
	tt := table.NewGroupTester(newGroup(Config{Rules: DefaultRules(), Epochs: catalogue(), Metrics: NewMetrics(metrics.New())}, false, 0),
		TableCodec)
	now := time.Now().UTC().Truncate(time.Millisecond)
	record := func(version int64) *kgo.Record {
		data, err := schemas.RawDocuments.Encode(doc(2, version, now))
		if err != nil {
			t.Fatal(err)
		}
		return tt.Record(topics.DocumentsIngest, 0, "shop/1", data)
	}
	verdict := func(out []*kgo.Record) (schemas.Decision, int) {
		t.Helper()
		var got schemas.Decision
		changes := 0
		for _, r := range out {
			switch r.Topic {
			case topics.DocumentsResults:
				var v schemas.Verdict
				if err := schemas.Verdicts.Decode(r.Value, &v); err != nil {
					t.Fatal(err)
				}
				got = v.Verdict
			case topics.DocumentsChanges:
				changes++
			}
		}
		return got, changes
	}
	v2 := record(2)
	out, err := tt.ConsumeBatch(v2)
	if err != nil {
		t.Fatal(err)
	}
	if v, changes := verdict(out); v != schemas.Accepted || changes != 1 {
		t.Fatalf("version 2: %s with %d changes, want ACCEPTED with 1", v, changes)
	}
	v1 := record(1)
	if out, err = tt.ConsumeBatch(v1); err != nil {
		t.Fatal(err)
	}
	if v, changes := verdict(out); v != schemas.Stale || changes != 0 {
		t.Fatalf("version 1 after 2: %s with %d changes, want STALE with none", v, changes)
	}
	if out, err = tt.ConsumeBatch(v2, v1); err != nil {
		t.Fatal(err)
	}
	if v, changes := verdict(out[:2]); v != schemas.Accepted || changes != 1 {
		t.Fatalf("version 2 read again: %s with %d changes, want its ACCEPTED again and its change", v, changes)
	}
	if v, changes := verdict(out[2:]); v != schemas.Stale || changes != 0 {
		t.Fatalf("version 1 read again: %s with %d changes, want STALE with none", v, changes)
	}
	rec, ok := tt.Value("shop/1").(*schemas.RegistryRecord)
	if !ok || rec.Version != 2 {
		t.Fatalf("the table holds %#v, want version 2", tt.Value("shop/1"))
	}
}
