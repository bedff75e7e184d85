package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/cabinet"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// offerlog runs one command line in process and returns its exit status,
// stdout and stderr.
func offerlog(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	code, _, stderr := offerlog(t, "")
	if code != 2 || !strings.Contains(stderr, "usage: offerlog COMMAND") {
		t.Fatalf("no arguments: %d %s", code, stderr)
	}
	code, _, stderr = offerlog(t, "", "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %d %s", code, stderr)
	}
	code, _, stderr = offerlog(t, "", "consume", "documents.ingest")
	if code != 2 || !strings.Contains(stderr, "--brokers") {
		t.Fatalf("missing brokers: %d %s", code, stderr)
	}
	// An unknown component is a usage error like the others (it exited 1).
	code, _, stderr = offerlog(t, "", "run", "foo", "--brokers", "127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, `unknown component "foo"`) {
		t.Fatalf("run foo: %d %s", code, stderr)
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		if code, out, _ := offerlog(t, "", args...); code != 0 || !strings.Contains(out, "usage: offerlog COMMAND") {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	for _, args := range [][]string{{"help", "consume"}, {"consume", "--help"}} {
		if code, out, _ := offerlog(t, "", args...); code != 0 || !strings.Contains(out, "-from-beginning") {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	// run COMPONENT --help lists the flags that concern the component.
	for component, want := range map[string]struct{ has, hasNot []string }{
		"api":       {[]string{"-wait-timeout", "-http", "-brokers", "-tls-cert"}, []string{"-ydb", "-shards", "-master", "-sweep-interval"}},
		"sink-ydb":  {[]string{"-ydb", "-source"}, []string{"-shards", "-wait-timeout", "-kafka-addr"}},
		"numerator": {[]string{"-zookeeper", "-master", "-ttl-generations"}, []string{"-ydb", "-table", "-max-document-bytes"}},
	} {
		code, out, _ := offerlog(t, "", "run", component, "--help")
		if code != 0 {
			t.Fatalf("run %s --help: %d", component, code)
		}
		for _, fl := range want.has {
			if !strings.Contains(out, "  "+fl+" ") {
				t.Errorf("run %s --help lacks %s:\n%s", component, fl, out)
			}
		}
		for _, fl := range want.hasNot {
			if strings.Contains(out, "  "+fl+" ") {
				t.Errorf("run %s --help lists %s, which it does not read", component, fl)
			}
		}
	}
	// A command that writes nothing takes no producer's flags, nor lists them.
	for _, args := range [][]string{{"consume", "--help"}, {"get", "--help"}, {"lag", "--help"}, {"topics", "list", "--help"}} {
		code, out, _ := offerlog(t, "", args...)
		if code != 0 || strings.Contains(out, "-compression") || strings.Contains(out, "-max-record-bytes") || !strings.Contains(out, "-kafka-config") {
			t.Errorf("%v lists a producer's flags, or not its own:\n%s", args, out)
		}
	}
	if code, out, _ := offerlog(t, "", "produce", "--help"); code != 0 || !strings.Contains(out, "-compression") {
		t.Errorf("produce --help lacks --compression:\n%s", out)
	}
	if code, out, _ := offerlog(t, "", "dev", "--help"); code != 0 || !strings.Contains(out, "-ydb") || !strings.Contains(out, "-kafka-addr") {
		t.Fatalf("dev --help lists every flag: %d\n%s", code, out)
	}
	if code, out, _ := offerlog(t, "", "replay", "--help"); code != 0 || strings.Contains(out, "-kafka-addr") || strings.Contains(out, "-http ") {
		t.Fatalf("replay --help lists a flag of dev: %d\n%s", code, out)
	}
	if code, out, _ := offerlog(t, "", "help", "topics"); code != 0 || !strings.Contains(out, "usage: offerlog topics ensure|list") {
		t.Fatalf("help topics: %d %s", code, out)
	}
	if code, out, _ := offerlog(t, "", "--version"); code != 0 || !strings.HasPrefix(out, "offerlog ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %d %s", code, out)
	}
	if code, _, stderr := offerlog(t, "", "consume", "--no-such-flag"); code != 2 || !strings.Contains(stderr, "no-such-flag") {
		t.Fatalf("an unknown flag: %d %s", code, stderr)
	}
	code, _, stderr = offerlog(t, "", "run", "numerator", "--brokers", "127.0.0.1:1", "--lock-timeout", "0s", "--session-timeout", "-1s")
	if code == 0 || !strings.Contains(stderr, "lock timeout 0s must be positive, session timeout -1s not negative") {
		t.Fatalf("bad numerator timeouts: %d %s", code, stderr)
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	t.Setenv("OFFERLOG_BROKERS", "127.0.0.1:1")
	t.Setenv("OFFERLOG_MAX", "many")
	code, _, stderr := offerlog(t, "", "consume", "documents.ingest")
	if code != 2 || !strings.Contains(stderr, "OFFERLOG_MAX") {
		t.Fatalf("a bad environment value is not reported: %d %s", code, stderr)
	}
}

const doc1 = `{"key":"shop/1","value":{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":[{"name":"title","string":"bike"}]}}`
const doc2 = `{"key":"shop/2","value":{"pk":"2","version":1,"epoch":1,"action":"DELETE","timestamp":1762000000000}}`
const badDoc = `{"key":"shop/3","value":{"pk":"3","version":"one","epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z"}}`

func TestTopicsProduceConsume(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")

	code, out, stderr := offerlog(t, "", "topics", "list", "--brokers", addr, "--partitions", "2")
	if code != 1 || !strings.Contains(out, "missing") {
		t.Fatalf("list before ensure: %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = offerlog(t, "", "topics", "wait", "--brokers", addr, "--partitions", "2", "--timeout", "1s")
	if code != 1 || !strings.Contains(stderr, "documents.ingest missing") {
		t.Fatalf("wait before ensure: %d %s", code, stderr)
	}
	code, out, stderr = offerlog(t, "", "topics", "ensure", "--brokers", addr, "--partitions", "2")
	if code != 0 || !strings.Contains(out, "created documents.ingest") {
		t.Fatalf("ensure: %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := offerlog(t, "", "topics", "wait", "--brokers", addr, "--partitions", "2"); code != 0 || !strings.Contains(out, "topics ok") {
		t.Fatalf("wait after ensure: %d %s%s", code, out, stderr)
	}
	code, out, stderr = offerlog(t, "", "topics", "list", "--brokers", addr, "--partitions", "2")
	if code != 0 || !strings.Contains(out, "epochs") || !strings.Contains(out, "compact") {
		t.Fatalf("list after ensure: %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = offerlog(t, "", "topics", "list", "--brokers", addr, "--partitions", "3")
	if code != 1 || !strings.Contains(out, "has 2 partitions, catalogue says 3") {
		t.Fatalf("list with other partitions: %d\n%s%s", code, out, stderr)
	}

	// A line that does not fit is reported with its number; the others are written.
	code, _, stderr = offerlog(t, doc1+"\n"+badDoc+"\n\n"+doc2+"\nnot json\n", "produce", "--brokers", addr, topics.DocumentsIngest)
	if code != 1 || !strings.Contains(stderr, "line 2:") || !strings.Contains(stderr, "version: want an integer") ||
		!strings.Contains(stderr, "line 5:") || !strings.Contains(stderr, "2 written, 2 rejected") {
		t.Fatalf("produce: %d\n%s", code, stderr)
	}
	code, _, stderr = offerlog(t, doc1, "produce", "--brokers", addr, "nosuch.topic")
	if code != 1 || !strings.Contains(stderr, "no schema") {
		t.Fatalf("produce to a topic without schema: %d %s", code, stderr)
	}

	code, out, stderr = offerlog(t, "", "consume", "--brokers", addr, topics.DocumentsIngest, "--from-beginning", "--max", "2")
	if code != 0 {
		t.Fatalf("consume: %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("consume printed %d lines:\n%s", len(lines), out)
	}
	var again strings.Builder
	keys := map[string]bool{}
	for _, l := range lines {
		var c struct {
			Key       string         `json:"key"`
			Value     map[string]any `json:"value"`
			Partition *int32         `json:"partition"`
			Offset    *int64         `json:"offset"`
			Timestamp string         `json:"timestamp"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		if c.Partition == nil || c.Offset == nil || c.Timestamp == "" || c.Value["pk"] == nil {
			t.Fatalf("consumed line lacks a member: %s", l)
		}
		keys[c.Key] = true
		line, _ := json.Marshal(map[string]any{"key": c.Key, "value": c.Value})
		again.Write(append(line, '\n'))
	}
	if !keys["shop/1"] || !keys["shop/2"] {
		t.Fatalf("keys %v", keys)
	}
	// What consume prints, produce takes back.
	code, _, stderr = offerlog(t, again.String(), "produce", "--brokers", addr, topics.DocumentsIngest)
	if code != 0 {
		t.Fatalf("produce what consume printed: %d %s", code, stderr)
	}
	// --timeout stops a consumer that waits for new records.
	start := time.Now()
	code, out, _ = offerlog(t, "", "consume", "--brokers", addr, topics.DocumentsIngest, "--timeout", "500ms")
	if code != 0 || out != "" || time.Since(start) > 30*time.Second {
		t.Fatalf("consume --timeout: %d %q after %s", code, out, time.Since(start))
	}

	// Ordinary Kafka: kcat reads our keys and writes records we read.
	kcat(t, addr)

	// Replaying the registry on this cluster (no documents decided yet).
	code, out, stderr = offerlog(t, "", "replay", "--brokers", addr, "--partitions", "2", "--data", t.TempDir(), "registry")
	if code != 0 || !strings.Contains(out, "replayed registry") {
		t.Fatalf("replay: %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = offerlog(t, "", "numerator", "seal", "3", "--brokers", addr)
	if code != 0 || !strings.Contains(out, "SEAL sent") {
		t.Fatalf("numerator seal: %d %s %s", code, out, stderr)
	}
	code, _, stderr = offerlog(t, "", "numerator", "rebuild", "--brokers", addr)
	if code != 2 || !strings.Contains(stderr, "--force") {
		t.Fatalf("numerator rebuild without --force: %d %s", code, stderr)
	}
	code, _, stderr = offerlog(t, "", "numerator", "reshard", "--scheme", "99", "--brokers", addr)
	if code != 2 || !strings.Contains(stderr, "unknown scheme") {
		t.Fatalf("numerator reshard to an unknown scheme: %d %s", code, stderr)
	}
	code, out, _ = offerlog(t, "", "consume", "--brokers", addr, topics.NumeratorGenerations, "--from-beginning", "--max", "1")
	if code != 0 || !strings.Contains(out, `"action":"SEAL"`) || !strings.Contains(out, `"generation":3`) {
		t.Fatalf("the marker: %s", out)
	}
	// An offer command written as JSON is ordinary input of the aggregate,
	// and the offer storage's groups replay from the CLI too.
	cmd := `{"key":"12345678903","value":{"kind":"CREATE","offer_id":"12345678903","seller_id":"s1","draft_id":"d1",` +
		`"offer":{"id":"12345678903","category":"cars","title":"Lada"}}}`
	if code, _, stderr = offerlog(t, cmd+"\n", "produce", "--brokers", addr, topics.OffersCommands); code != 0 {
		t.Fatalf("produce an offer command: %d %s", code, stderr)
	}
	for _, g := range []string{"offers", "cabinet", "drafts"} {
		code, out, stderr = offerlog(t, "", "replay", "--brokers", addr, "--partitions", "2", "--data", t.TempDir(), g)
		if code != 0 || !strings.Contains(out, "replayed "+g) {
			t.Fatalf("replay %s: %d\n%s%s", g, code, out, stderr)
		}
	}
	code, out, _ = offerlog(t, "", "consume", "--brokers", addr, topics.OffersResults, "--from-beginning", "--max", "1")
	if code != 0 || !strings.Contains(out, `"outcome":"OK"`) || !strings.Contains(out, `"version":1`) {
		t.Fatalf("the aggregate's answer: %s", out)
	}
	code, out, _ = offerlog(t, "", "consume", "--brokers", addr, string(topics.CabinetTable), "--from-beginning", "--max", "1")
	if code != 0 || !strings.Contains(out, `"seller_id":"s1"`) || !strings.Contains(out, `{"count":1,"name":"active"}`) {
		t.Fatalf("the cabinet after replays: %s", out)
	}
	code, _, stderr = offerlog(t, "", "run", "sink-ydb", "--brokers", addr)
	if code != 1 || !strings.Contains(stderr, "--ydb is required") {
		t.Fatalf("sink-ydb without --ydb: %d %s", code, stderr)
	}
	code, _, stderr = offerlog(t, "", "run", "sink-ydb", "--brokers", addr, "--ydb", "grpc://127.0.0.1:1/local", "--source", "nosuch")
	if code != 1 || !strings.Contains(stderr, `no mapping for topic "nosuch"`) {
		t.Fatalf("sink-ydb of an unknown topic: %d %s", code, stderr)
	}
	code, _, stderr = offerlog(t, "", "replay", "--brokers", addr, "nosuch")
	if code != 2 || !strings.Contains(stderr, "unknown group") {
		t.Fatalf("replay of an unknown group: %d %s", code, stderr)
	}
}

func kcat(t *testing.T, addr string) {
	t.Helper()
	path, ok := testkit.LookTool(t, "kcat")
	if !ok {
		t.Log("kcat is not installed: the kcat part is skipped (make test installs it and runs it)")
		return
	}
	cmd := exec.Command(path, "-C", "-b", addr, "-t", topics.DocumentsIngest, "-e", "-q", "-f", "%k\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	n := 0
	for sc.Scan() {
		if k := sc.Text(); k != "shop/1" && k != "shop/2" {
			t.Fatalf("kcat read key %q", k)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("kcat read %d records, want 4:\n%s", n, out)
	}
	// kcat writes with the murmur2 partitioner; offerlog consume reads it
	// back, raw since it is no Avro, and in the partition our clients use.
	cmd = exec.Command(path, "-P", "-b", addr, "-t", topics.DocumentsResults, "-K", ":", "-X", "topic.partitioner=murmur2")
	cmd.Stdin = strings.NewReader("shop/7:hello from kcat\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	code, out2, stderr := offerlog(t, "", "consume", "--brokers", addr, topics.DocumentsResults, "--from-beginning", "--max", "1")
	if code != 0 || !strings.Contains(out2, `"value":"hello from kcat"`) || !strings.Contains(out2, "undecodable") {
		t.Fatalf("consume what kcat wrote: %d %s %s", code, out2, stderr)
	}
	var c struct {
		Partition int32 `json:"partition"`
	}
	_ = json.Unmarshal([]byte(out2), &c)
	p := kgo.StickyKeyPartitioner(nil).ForTopic(topics.DocumentsResults).Partition(&kgo.Record{Key: []byte("shop/7")}, 2)
	if int(c.Partition) != p {
		t.Fatalf("kcat put shop/7 in partition %d, offerlog's clients use %d", c.Partition, p)
	}
}

// TestDeadLettersListAndRedrive: `deadletters list` shows where each dead
// letter came from and why; `redrive` puts a complete one back on its topic
// and partition as it was, and refuses one that kept only part of its value.
func TestDeadLettersListAndRedrive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "in", Partitions: 3}, {Name: "in.dead", Partitions: 1}, {Name: "empty.dead", Partitions: 2}})
	small := &kgo.Record{Topic: "in", Partition: 2, Offset: 5, Key: []byte("k1"), Value: []byte("garbage"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
	big := &kgo.Record{Topic: "in", Partition: 1, Offset: 9, Key: []byte("k2"), Value: bytes.Repeat([]byte("x"), 1<<20)}
	var dead []*kgo.Record
	for _, r := range []*kgo.Record{small, big} {
		d, err := streams.DeadLetterRecord("in.dead", "g", r, "undecodable")
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, d)
	}
	if err := testkit.Client(t, b.Addrs()).ProduceSync(testkit.Context(t, 30*time.Second), dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := offerlog(t, "", "deadletters", "list", "--brokers", addr, "in.dead")
	if code != 0 || !strings.Contains(out, `"source_partition":2,"source_offset":5,"key":"k1","group":"g","reason":"undecodable","value_size":7`) ||
		!strings.Contains(out, `"value_size":1048576`) || !strings.Contains(out, `"complete":false`) {
		t.Fatalf("list: %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = offerlog(t, "", "deadletters", "redrive", "--brokers", addr, "in.dead")
	if code != 2 {
		t.Fatalf("redrive without --offset or --all: %d %s", code, stderr)
	}
	// An empty dead letter topic has nothing to redrive: not a failure (it
	// exited 1 with "offset -1").
	code, out, stderr = offerlog(t, "", "deadletters", "redrive", "--brokers", addr, "empty.dead", "--all")
	if code != 0 || !strings.Contains(out, "redriven 0 of 0") {
		t.Fatalf("redrive --all of an empty topic: %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = offerlog(t, "", "deadletters", "redrive", "--brokers", addr, "in.dead", "--all")
	if code != 1 || !strings.Contains(out, "redriven 1 of 2") || !strings.Contains(stderr, "cannot be put back") {
		t.Fatalf("redrive --all: %d\n%s%s", code, out, stderr)
	}
	got := testkit.ReadAll(t, b.Addrs(), "in")
	if len(got) != 1 || got[0].Partition != 2 || string(got[0].Key) != "k1" || string(got[0].Value) != "garbage" ||
		len(got[0].Headers) != 2 || got[0].Headers[0].Key != "trace" || got[0].Headers[1].Key != streams.RedrivenHeader {
		t.Fatalf("redriven records %+v", got)
	}
	code, out, stderr = offerlog(t, "", "deadletters", "redrive", "--brokers", addr, "in.dead", "--offset", "0")
	if code != 0 || !strings.Contains(out, "redriven 1 of 1") {
		t.Fatalf("redrive --offset 0: %d\n%s%s", code, out, stderr)
	}
}

// TestSealOfASealedGenerationFails: sealing a generation the numerator's
// states show sealed says so and exits 1; a later one is sent.
func TestSealOfASealedGenerationFails(t *testing.T) {
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), topics.Catalogue(2))
	st, err := schemas.NumeratorStates.Encode(&schemas.NumeratorState{Version: "0.0.0.5", Generation: 5, Shards: []schemas.ShardSummary{},
		MarkerPartition: -1, MarkerOffset: -1})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, b.Addrs(), topics.NumeratorStates, []byte("0"), st)
	code, _, stderr := offerlog(t, "", "numerator", "seal", "5", "--brokers", addr)
	if code != 1 || !strings.Contains(stderr, "generation 5 is sealed already (state 0.0.0.5)") {
		t.Fatalf("seal of a sealed generation: %d %s", code, stderr)
	}
	code, out, stderr := offerlog(t, "", "numerator", "seal", "6", "--brokers", addr)
	if code != 0 || !strings.Contains(out, "SEAL sent") {
		t.Fatalf("seal of the next generation: %d %s %s", code, out, stderr)
	}
}

// TestBrokerCommandsFailInsteadOfWaiting: consume and produce against a
// broker that is not there, or a topic that does not exist, exit 1 within
// their timeout with a message naming it.
func TestBrokerCommandsFailInsteadOfWaiting(t *testing.T) {
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), topics.Catalogue(1))
	nowhere := "127.0.0.1:1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"consume", "--brokers", nowhere, topics.DocumentsResults, "--timeout", "2s"}, "cannot reach the brokers 127.0.0.1:1"},
		{[]string{"produce", "--brokers", nowhere, topics.DocumentsIngest, "--timeout", "2s"}, "cannot reach the brokers 127.0.0.1:1"},
		{[]string{"consume", "--brokers", addr, "no.such.topic"}, `topic "no.such.topic" does not exist`},
		{[]string{"produce", "--brokers", addr, "--raw", "no.such.topic"}, `topic "no.such.topic" does not exist`},
	} {
		start := time.Now()
		code, _, stderr := offerlog(t, "", c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: %d %s", c.args, code, stderr)
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("%v took %s", c.args, d)
		}
	}
}

// TestTopicsListShowsEveryTopic: topics list shows the stages' queues, the
// topics outside the catalogue, and every topic's end offsets.
func TestTopicsListShowsEveryTopic(t *testing.T) {
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), append(topics.Catalogue(2), append(topics.ForStages([]string{"price"}, nil, 2),
		topics.Topic{Name: "mine", Partitions: 3})...))
	testkit.Put(t, b.Addrs(), "mine", []byte("k"), []byte("v"))
	testkit.Put(t, b.Addrs(), "mine", []byte("k"), []byte("w"))
	code, out, stderr := offerlog(t, "", "topics", "list", "--brokers", addr, "--partitions", "2")
	if code != 0 {
		t.Fatalf("list: %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"scheduler.queue.price.low", "END OFFSETS"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	var mine string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "mine ") {
			mine = line
		}
	}
	if f := strings.Fields(mine); len(f) < 5 || f[1] != "3" || f[4] != "2" || !strings.Contains(mine, "not in the catalogue") {
		t.Errorf("the topic outside the catalogue: %q", mine)
	}
}

// TestLagPrintsEachPartition: lag GROUP prints, per topic and partition,
// the group's commit, the end offset and the lag; a group without commits
// is an error.
func TestLagPrintsEachPartition(t *testing.T) {
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "in", Partitions: 1}})
	for range 5 {
		testkit.Put(t, b.Addrs(), "in", []byte("k"), []byte("v"))
	}
	adm := testkit.Admin(t, b.Addrs())
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "in", Partition: 0, At: 2, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(testkit.Context(t, time.Minute), "readers", offsets); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := offerlog(t, "", "lag", "--brokers", addr, "readers")
	if code != 0 || !strings.Contains(out, "GROUP") {
		t.Fatalf("lag: %d\n%s%s", code, out, stderr)
	}
	var row []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "readers ") {
			row = strings.Fields(line)
		}
	}
	if len(row) != 6 || row[1] != "in" || row[2] != "0" || row[3] != "2" || row[4] != "5" || row[5] != "3" {
		t.Fatalf("lag row %q in\n%s", row, out)
	}
	if code, _, stderr := offerlog(t, "", "lag", "--brokers", addr, "nobody"); code != 1 || !strings.Contains(stderr, `group "nobody" has no commits`) {
		t.Fatalf("lag of an unknown group: %d %s", code, stderr)
	}
}

// cataloguedBroker starts an embedded broker and makes offerlog's topic
// catalogue on it (2 partitions) with offerlog topics ensure; it returns
// its addresses, and them as --brokers takes them. An integration test's:
// skipped with -short.
func cataloguedBroker(t *testing.T) (brokers []string, addr string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration")
	}
	brokers = testkit.Broker(t, "").Addrs()
	addr = strings.Join(brokers, ",")
	if code, _, stderr := offerlog(t, "", "topics", "ensure", "--brokers", addr, "--partitions", "2"); code != 0 {
		t.Fatalf("ensure: %d %s", code, stderr)
	}
	return brokers, addr
}

func TestReplayAfterRetentionRefuses(t *testing.T) {
	brokers, addr := cataloguedBroker(t)
	code, out, stderr := offerlog(t, "", "topics", "list", "--brokers", addr, "--partitions", "2")
	if code != 0 || !regexp.MustCompile(`(?m)^documents\.ingest\s+2\s+delete\s+-1\s`).MatchString(out) {
		t.Fatalf("documents.ingest is not kept for ever: %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := offerlog(t, doc1+"\n"+doc2+"\n", "produce", "--brokers", addr, topics.DocumentsIngest); code != 0 {
		t.Fatalf("produce: %d %s", code, stderr)
	}
	// Retention removes the first record of the partition that has one
	// (DeleteRecords is what retention does to a segment).
	adm := testkit.Admin(t, brokers)
	ctx := testkit.Context(t, time.Minute)
	ends, err := adm.ListEndOffsets(ctx, topics.DocumentsIngest)
	if err != nil {
		t.Fatal(err)
	}
	var cut int32 = -1
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 && cut < 0 {
			cut = o.Partition
		}
	})
	del := kadm.Offsets{}
	del.AddOffset(topics.DocumentsIngest, cut, 1, -1)
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	data := t.TempDir()
	code, _, stderr = offerlog(t, "", "replay", "--brokers", addr, "--partitions", "2", "--data", data, "registry")
	want := fmt.Sprintf("documents.ingest partition %d: offsets 0 to 0 are gone (first missing 0, first kept 1)", cut)
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--allow-gaps") {
		t.Fatalf("replay of a cut input: exit %d, want 1 naming %q:\n%s", code, want, stderr)
	}
	code, out, stderr = offerlog(t, "", "replay", "--brokers", addr, "--partitions", "2", "--data", data, "--allow-gaps", "registry")
	if code != 0 || !strings.Contains(out, "replayed registry: table rebuilt") || !strings.Contains(stderr, "replay: done") {
		t.Fatalf("replay --allow-gaps: %d\n%s%s", code, out, stderr)
	}
	// The registry had never run: the record left was never answered, so
	// the replay answers it, unmarked.
	verdicts := testkit.ReadAll(t, brokers, topics.DocumentsResults)
	if len(verdicts) != 1 || len(verdicts[0].Headers) != 0 {
		t.Fatalf("verdicts after the replay: %d, want 1 without a replay header", len(verdicts))
	}
	code, _, stderr = offerlog(t, "", "replay", "--brokers", addr, "--partitions", "2", "--data", data, "indexer")
	if code != 2 || !strings.Contains(stderr, "--reemit") {
		t.Fatalf("replay indexer without --reemit: %d %s", code, stderr)
	}
}

func TestFeedsStatus(t *testing.T) {
	brokers, addr := cataloguedBroker(t)
	put := func(st schemas.FeedStatus) {
		data, err := schemas.FeedStatuses.Encode(&st)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Put(t, brokers, topics.FeedsStatus, []byte(fmt.Sprintf("%s/%d", st.SellerID, st.TaskID)), data)
	}
	put(schemas.FeedStatus{SellerID: "s1", TaskID: 4, State: schemas.FeedLoading, Received: 1, Applied: 1, UpdatedAt: time.Now()})
	put(schemas.FeedStatus{SellerID: "s1", TaskID: 4, State: schemas.FeedPartial, Received: 2, Applied: 2, Uploaded: 3,
		Reason: "2 of the 3 items uploaded were loaded", UpdatedAt: time.Now()})
	put(schemas.FeedStatus{SellerID: "s2", TaskID: 4, State: schemas.FeedDone, Received: 5, Applied: 5, UpdatedAt: time.Now()})
	code, out, stderr := offerlog(t, "", "feeds", "status", "--brokers", addr, "4")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"seller_id":"s1"`) || !strings.Contains(lines[0], `"state":"PARTIAL"`) ||
		!strings.Contains(lines[0], `"reason":"2 of the 3 items uploaded were loaded"`) || !strings.Contains(lines[1], `"state":"DONE"`) {
		t.Fatalf("feeds status 4: %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := offerlog(t, "", "feeds", "status", "--brokers", addr, "--seller", "s2", "4"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("feeds status --seller s2 4: %d\n%s", code, out)
	}
	if code, _, stderr := offerlog(t, "", "feeds", "status", "--brokers", addr, "5"); code != 1 || !strings.Contains(stderr, "no status of task 5") {
		t.Fatalf("feeds status of an unknown task: %d %s", code, stderr)
	}
	if code, _, _ := offerlog(t, "", "feeds", "status", "--brokers", addr, "x"); code != 2 {
		t.Fatalf("feeds status x: %d, want 2", code)
	}
}

// TestReplayTellsItsProgress: replay says on stderr, from its start, how
// many of the input records it must reach it has done, and ends with a
// summary.
func TestReplayTellsItsProgress(t *testing.T) {
	_, addr := cataloguedBroker(t)
	var docs strings.Builder
	for i := range 500 {
		fmt.Fprintf(&docs, `{"key":"shop/%d","value":{"pk":"%d","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":[{"name":"title","string":"bike"}]}}`+"\n", i, i)
	}
	if code, _, stderr := offerlog(t, docs.String(), "produce", "--brokers", addr, topics.DocumentsIngest); code != 0 {
		t.Fatalf("produce: %d %s", code, stderr)
	}
	code, out, stderr := offerlog(t, "", "replay", "--brokers", addr, "--partitions", "2", "--data", t.TempDir(), "registry")
	if code != 0 || !regexp.MustCompile(`msg="replay: progress" group=registry records=\d+ of=500 percent=[\d.]+ rate=\d+/s eta=\S+`).MatchString(stderr) ||
		!strings.Contains(stderr, `msg="replay: done" group=registry input_records=500`) || !strings.Contains(out, "replayed registry") ||
		strings.Contains(stderr, "progress unknown") || strings.Contains(stderr, "GROUP_ID_NOT_FOUND") {
		t.Fatalf("replay: %d %s\n%s", code, out, stderr)
	}
}

// TestComponentFlagsAreTheSpecs: every flag a component declares
// (component.Flag, platform.ComponentFlags) is a flag of offerlog run and
// offerlog dev with the declared usage and default, --help of run
// COMPONENT lists it for the components that declare it and no other,
// and the defaults are platform.DefaultConfig's (which the tests and the
// bench start from).
func TestComponentFlagsAreTheSpecs(t *testing.T) {
	declared, readers := platform.ComponentFlags()
	for _, command := range []string{"run", "dev"} {
		f := newFlags(command, io.Discard).produces()
		cfg := f.platform()
		f.brokers()
		if err := f.parse(nil); err != nil {
			t.Fatal(err)
		}
		for name, d := range declared {
			fl := f.Lookup(name)
			if fl == nil {
				t.Errorf("%v declare a flag --%s that offerlog %s does not have", readers[name], name, command)
				continue
			}
			if fl.Usage != d.Usage || (d.Default != "" && fl.DefValue != d.Default) {
				t.Errorf("offerlog %s --%s: usage %q, default %q; declared %q, %q", command, name, fl.Usage, fl.DefValue, d.Usage, d.Default)
			}
			if v := fl.Value.String(); d.Default == "" && v != fl.DefValue && !strings.Contains(d.Usage, "(default") {
				t.Errorf("--%s is %q unless given, which its declaration neither gives nor says", name, v)
			}
		}
		want := platform.DefaultConfig()
		got := *cfg
		// the process's own flags, which no component declares
		got.Client, got.Credentials, got.Memory, got.Limits = want.Client, want.Credentials, want.Memory, want.Limits
		if !reflect.DeepEqual(got, want) {
			t.Errorf("offerlog %s's flags unset give a configuration unlike platform.DefaultConfig:\n%+v\n%+v", command, got, want)
		}
	}
	for _, c := range platform.AllComponents() {
		var help strings.Builder
		f := newFlags("run", &help).produces()
		f.platform()
		f.component = c
		f.Usage()
		for name := range declared {
			shown := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `( |$)`).MatchString(help.String())
			if reads := slices.Contains(readers[name], c); shown != reads {
				t.Errorf("run %s --help lists --%s: %v; its readers are %v", c, name, shown, readers[name])
			}
		}
	}
}

// TestHelpShowsNoSecret: --help prints no flag's value from the
// environment (--cache-token defaulted to $OFFERLOG_CACHE_TOKEN, and
// printed the admin token as its default).
func TestHelpShowsNoSecret(t *testing.T) {
	t.Setenv("OFFERLOG_CACHE_TOKEN", "s3cret-token")
	var help strings.Builder
	f := newFlags("run", &help).produces()
	f.platform()
	f.brokers()
	if err := f.parse([]string{"--help"}); err == nil {
		t.Fatal("--help parsed as a run")
	}
	if !strings.Contains(help.String(), "-cache-token") || strings.Contains(help.String(), "s3cret-token") {
		t.Errorf("--help shows the token, or no --cache-token:\n%s", help.String())
	}
}

// TestTheCacheCutsByVirtualShardsByDefault: --virtual-shards is 1024
// unless given, as the documents say (it was 0: partition ranges, resharded
// by stopping a data centre), and the shipped manifests name it.
func TestTheCacheCutsByVirtualShardsByDefault(t *testing.T) {
	f := newFlags("run", io.Discard).produces()
	cfg := f.platform()
	if err := f.parse([]string{"cache"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Cache.Virtual != serving.DefaultVirtual {
		t.Errorf("--virtual-shards is %d by default, want %d", cfg.Cache.Virtual, serving.DefaultVirtual)
	}
	for _, file := range []string{"../../deploy/k8s/base/50-offerlog.yaml", "../../deploy/compose.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		caches := len(regexp.MustCompile(`- run\n\s*- cache\n`).FindAllIndex(data, -1))
		if named := strings.Count(string(data), "- --virtual-shards\n"); named == 0 || named != caches {
			t.Errorf("%s: %d cache servers, %d of them with --virtual-shards", file, caches, named)
		}
	}
}

// TestCabinetRecount: offerlog cabinet recount compares each seller's
// cabinet (its spread keys summed) with a count over its offers, the
// archived ones included, and exits 1 naming those that differ.
func TestCabinetRecount(t *testing.T) {
	brokers, addr := cataloguedBroker(t)
	put := func(topic, key string, data []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		testkit.Put(t, brokers, topic, []byte(key), data)
	}
	offer := func(id, seller string, sold bool) *schemas.OfferRecord {
		p := int64(100)
		r := &schemas.OfferRecord{Offer: schemas.Offer{ID: id, SellerID: seller, Status: schemas.OfferActive, Price: &p}}
		if sold {
			r.Offer.Status, r.Billing = schemas.OfferSold, schemas.Billing{Sold: true, SoldPrice: p}
		}
		return r
	}
	// s1: two offers, one sold and archived since; its cabinet spread
	// over two keys. s2: an offer its cabinet does not count.
	a, sold, other := offer("a", "s1", false), offer("b", "s1", true), offer("c", "s2", false)
	for _, r := range []*schemas.OfferRecord{a, other} {
		data, err := schemas.OfferRecords.Encode(r)
		put(string(topics.OffersTable), r.Offer.ID, data, err)
	}
	data, err := schemas.OfferRecords.Encode(sold)
	put(string(topics.OffersArchive), "b", data, err)
	for i, r := range []*schemas.OfferRecord{a, sold} {
		part := cabinet.Recount([]*schemas.OfferRecord{r})["s1"]
		data, err := schemas.SellerCabinets.Encode(part)
		put(string(topics.CabinetTable), fmt.Sprint("s1/", i), data, err)
	}
	code, out, stderr := offerlog(t, "", "cabinet", "recount", "--brokers", addr, "s1")
	if code != 0 || !strings.Contains(out, `"seller":"s1","equal":true`) || !strings.Contains(out, `"sold":1`) {
		t.Fatalf("cabinet recount s1: %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = offerlog(t, "", "cabinet", "recount", "--brokers", addr)
	if code != 1 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"seller":"s2","equal":false`) || !strings.Contains(stderr, "1 sellers differs") {
		t.Fatalf("cabinet recount: %d\n%s%s", code, out, stderr)
	}
	if code, _, _ := offerlog(t, "", "cabinet", "count", "--brokers", addr); code != 2 {
		t.Fatalf("cabinet count: %d, want 2", code)
	}
}
