package platform_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/third_party/forked/avro"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// withField returns the current RawDocument schema with one more field.
func withField(t *testing.T, field string) string {
	t.Helper()
	cur, err := schemas.Current(schemas.RawDocumentName)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(cur.Text), &s); err != nil {
		t.Fatal(err)
	}
	var f any
	if err := json.Unmarshal([]byte(field), &f); err != nil {
		t.Fatal(err)
	}
	s["fields"] = append(s["fields"].([]any), f)
	out, _ := json.Marshal(s)
	return string(out)
}

// TestRegisteredSchemasAreUsed: a producer registers a new version of the
// ingest schema through the registry API, backward and forward compatible,
// and writes with it; the registry decodes its records. One registered by
// another API process (a record on schemas.registered) is learnt too. An
// incompatible one is refused with 409.
func TestRegisteredSchemasAreUsed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg := platformtest.Config(t.TempDir())
	cfg.PprofAddr = "127.0.0.1:0" // and the profiling endpoints, asked for
	r := platformtest.Start(t, cfg)
	brokers := r.Info.Brokers
	if resp, err := http.Get("http://" + r.Info.PprofAddr + "/debug/pprof/heap?debug=1"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("pprof on %q: %v %v", r.Info.PprofAddr, resp, err)
	} else {
		resp.Body.Close()
	}
	sr := "http://" + r.Info.HTTPAddr + "/schema-registry/subjects/" + topics.DocumentsIngest + "-value"
	testkit.RegisterEpoch(t, brokers, "shop")

	register := func(schema string) (int, map[string]any) {
		body, _ := json.Marshal(map[string]string{"schema": schema})
		resp, err := http.Post(sr+"/versions", "application/vnd.schemaregistry.v1+json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	// A field without a default: the new schema cannot read older data.
	if code, out := register(withField(t, `{"name":"source","type":"string"}`)); code != 409 || out["error_code"] != float64(409) {
		t.Fatalf("an incompatible schema: %d %v", code, out)
	}
	text := withField(t, `{"name":"source","type":"string","default":"web"}`)
	code, out := register(text)
	if code != 200 || out["id"] == nil {
		t.Fatalf("a compatible schema: %d %v", code, out)
	}
	id := int32(out["id"].(float64))
	var latest struct {
		Version int   `json:"version"`
		ID      int32 `json:"id"`
	}
	resp, err := http.Get(sr + "/versions/latest")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&latest)
	resp.Body.Close()
	if latest.ID != id {
		t.Fatalf("the latest version is id %d, want the registered %d", latest.ID, id)
	}
	if again, out := register(text); again != 200 || int32(out["id"].(float64)) != id {
		t.Fatalf("registering it again: %d %v", again, out)
	}

	// Another API process registers one more (it writes schemas.registered
	// and learns it itself); this one learns it from the topic.
	other := withField(t, `{"name":"channel","type":"string","default":""}`)
	otherSchema, err := avro.Parse(other)
	if err != nil {
		t.Fatal(err)
	}
	otherText, _ := json.Marshal(otherSchema)
	otherID := schemas.RegistryID(string(otherText))
	value, err := schemas.RegisteredSchemas.Encode(&schemas.RegisteredSchema{Subject: topics.DocumentsIngest + "-value", Schema: other})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Put(t, brokers, topics.SchemasRegistered, []byte("other"), value)

	// Documents written with each, in Confluent framing, are accepted.
	doc := func(pk, extra, val string) map[string]any {
		return map[string]any{"pk": pk, "version": int64(1), "epoch": int64(1), "action": "UPSERT",
			"timestamp": time.Now().UTC().Truncate(time.Millisecond), "ttl_seconds": int64(0),
			"fields":     []map[string]any{{"name": "title", "string": map[string]any{"string": "bike"}}},
			"embeddings": []map[string]any{}, extra: val}
	}
	for _, c := range []struct {
		schema string
		id     int32
		pk     string
		field  string
	}{{text, id, "reg-1", "source"}, {other, otherID, "reg-2", "channel"}} {
		sch, err := avro.Parse(c.schema)
		if err != nil {
			t.Fatal(err)
		}
		body, err := avro.Marshal(sch, doc(c.pk, c.field, "kafka"))
		if err != nil {
			t.Fatalf("%s: %v", c.pk, err)
		}
		framed := append([]byte{0, byte(c.id >> 24), byte(c.id >> 16), byte(c.id >> 8), byte(c.id)}, body...)
		cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
		if err := cl.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte("shop/" + c.pk), Value: framed}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	verdicts := map[string]schemas.Verdict{}
	testkit.Eventually(t, time.Minute, "the verdicts of both documents", func() bool {
		for _, rec := range testkit.ReadAll(t, brokers, topics.DocumentsResults) {
			var v schemas.Verdict
			if schemas.Verdicts.Decode(rec.Value, &v) == nil {
				verdicts[v.PK] = v
			}
		}
		return len(verdicts) >= 2
	})
	for _, pk := range []string{"reg-1", "reg-2"} {
		if v := verdicts[pk]; v.Verdict != schemas.Accepted {
			t.Errorf("%s: %s %s", pk, v.Verdict, v.Reason)
		}
	}
}
