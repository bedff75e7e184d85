package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/topics"
)

// consumeAll runs offerlog consume --from-beginning --max n on topic and
// returns its lines, decoded, and its output as printed.
func consumeAll(t *testing.T, addr, topic string, n int) ([]consumed, string) {
	t.Helper()
	code, out, stderr := offerlog(t, "", "consume", "--brokers", addr, topic, "--from-beginning", "--max", strconv.Itoa(n))
	if code != 0 {
		t.Fatalf("consume %s: %d %s", topic, code, stderr)
	}
	var got []consumed
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var c consumed
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("consume printed %q: %v", line, err)
		}
		got = append(got, c)
	}
	if len(got) != n {
		t.Fatalf("consume %s printed %d records, want %d:\n%s", topic, len(got), n, out)
	}
	return got, out
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestConsumeProducesRoundTrip pipes what consume prints into produce, for
// every kind of topic: a schema's (the value re-encoded), a table's
// tombstones, and a topic without a schema whose values consume could not
// decode (UTF-8 text and bytes shown in base64), and checks the records
// written back are the records read: key and value always, partition and
// timestamp with --keep-partition and --keep-timestamp.
func TestConsumeProducesRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), append(topics.Catalogue(4), topics.Topic{Name: "plain", Partitions: 4}))

	// A schema's topic: two documents, taken back keeping their partition
	// and timestamp.
	if code, _, stderr := offerlog(t, doc1+"\n"+doc2+"\n", "produce", "--brokers", addr, topics.DocumentsIngest); code != 0 {
		t.Fatalf("produce: %d %s", code, stderr)
	}
	first, printed := consumeAll(t, addr, topics.DocumentsIngest, 2)
	if code, _, stderr := offerlog(t, printed, "produce", "--brokers", addr, topics.DocumentsIngest, "--keep-partition", "--keep-timestamp"); code != 0 {
		t.Fatalf("produce what consume printed: %d %s", code, stderr)
	}
	all, _ := consumeAll(t, addr, topics.DocumentsIngest, 4)
	for _, c := range first {
		var again *consumed
		for i := range all {
			if all[i].Offset != c.Offset && all[i].Key == c.Key && all[i].Partition == c.Partition {
				again = &all[i]
			}
		}
		if again == nil || jsonText(again.Value) != jsonText(c.Value) || again.Timestamp != c.Timestamp || again.Schema != c.Schema {
			t.Errorf("%s written back as %+v, was %+v", c.Key, again, c)
		}
	}

	// A table's tombstone: null is written back as null.
	testkit.Put(t, b.Addrs(), topics.RegistryTable, []byte("shop/1"), nil)
	_, printed = consumeAll(t, addr, string(topics.RegistryTable), 1)
	if code, _, stderr := offerlog(t, printed, "produce", "--brokers", addr, string(topics.RegistryTable)); code != 0 {
		t.Fatalf("produce a tombstone back: %d %s", code, stderr)
	}
	if tombs, _ := consumeAll(t, addr, string(topics.RegistryTable), 2); tombs[1].Value != nil || tombs[1].Key != "shop/1" {
		t.Errorf("the tombstone came back as %+v", tombs[1])
	}

	// Values without a schema: text, and bytes that are not UTF-8, which
	// consume shows in base64; produce --raw writes the same bytes back.
	values := [][]byte{[]byte("plain text"), {0xff, 0x00, 0xfe, 'x'}}
	for i, v := range values {
		testkit.Put(t, b.Addrs(), "plain", []byte{'k', byte('0' + i)}, v)
	}
	_, printed = consumeAll(t, addr, "plain", 2)
	if code, _, stderr := offerlog(t, printed, "produce", "--brokers", addr, "plain", "--raw"); code != 0 {
		t.Fatalf("produce --raw what consume printed: %d %s", code, stderr)
	}
	raw := testkit.ReadAll(t, b.Addrs(), "plain")
	if len(raw) != 4 {
		t.Fatalf("plain holds %d records, want 4", len(raw))
	}
	for _, r := range raw[2:] {
		want := values[r.Key[1]-'0']
		if !bytes.Equal(r.Value, want) {
			t.Errorf("key %s written back as %x, was %x", r.Key, r.Value, want)
		}
	}

	// What consume never prints is still refused, naming the member.
	for line, want := range map[string]string{
		`{"key":"a","value":null,"colour":"red"}`:                         `unknown member "colour"`,
		`{"key":1,"value":null}`:                                          "key: want a string",
		`{"key":"a","value":null,"partition":"x"}`:                        "partition: want an integer",
		`{"key":"a","value":null,"timestamp":"soon"}`:                     `timestamp: want RFC 3339`,
		`{"key":"a","value":{"pk":"1"},"schema":"offerlog.OfferCommand"}`: "this topic takes",
	} {
		args := []string{"produce", "--brokers", addr, topics.DocumentsIngest}
		if strings.Contains(line, "timestamp") {
			args = append(args, "--keep-timestamp")
		}
		if strings.Contains(line, "partition") {
			args = append(args, "--keep-partition")
		}
		code, _, stderr := offerlog(t, line+"\n", args...)
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("produce %s: %d %s, want an error saying %q", line, code, stderr, want)
		}
	}
}
