package api_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/offerlog/offerlog/third_party/forked/avro"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/api"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// registryServer serves the API on a real socket; the registry routes need
// no broker traffic, but the server needs a producer.
// The client "shop" has an epoch: its export subjects exist.
func registryServer(t *testing.T) string {
	t.Helper()
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(1))
	epochs := registry.NewCatalogue(registry.DefaultEpochGrace)
	epochs.Put(&schemas.EpochSchema{Client: "shop", Epoch: 1, Fields: []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString}}})
	srv, err := api.New(api.Config{Auth: auth.Off(testkit.Logger()), Producer: testkit.Client(t, brokers), Cluster: testkit.Cluster(t, brokers), Epochs: epochs,
		Partitions: 1, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

// call sends a request and decodes the JSON answer into out (if not nil),
// returning the status and the raw body.
func call(t *testing.T, method, url, body string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, string(raw)
}

func TestSchemaRegistryAnswersAsConfluentClientsExpect(t *testing.T) {
	base := registryServer(t)
	sr := base + "/schema-registry"

	var subjects []string
	if code, body := call(t, "GET", sr+"/subjects", "", &subjects); code != 200 {
		t.Fatalf("subjects: %d %s", code, body)
	}
	for _, tp := range append(topics.Catalogue(1), topics.ForClient("shop", 1)...) {
		if tp.Schema != "" && !slices.Contains(subjects, tp.Name+"-value") {
			t.Errorf("no subject %s-value in %v", tp.Name, subjects)
		}
	}
	if code, body := call(t, "GET", sr+"/subjects/saas.shop-value/versions", "", nil); code != 200 {
		t.Errorf("an existing client's export subject: %d %s", code, body)
	}
	if slices.ContainsFunc(subjects, func(s string) bool { return strings.HasSuffix(s, "-key") }) {
		t.Errorf("key subjects for string keys: %v", subjects)
	}

	// A subject's versions are its schema's releases that changed it, then
	// the current one: take one whose schema changed.
	var subject string
	var versions []int
	for _, sub := range subjects {
		if code, body := call(t, "GET", sr+"/subjects/"+sub+"/versions", "", &versions); code != 200 || len(versions) < 1 || versions[0] != 1 {
			t.Fatalf("versions of %s: %d %s", sub, code, body)
		}
		if len(versions) > 1 {
			subject = sub
			break
		}
	}
	if subject == "" {
		t.Fatal("no subject has two versions")
	}
	var latest, first api.SubjectVersion
	call(t, "GET", sr+"/subjects/"+subject+"/versions/latest", "", &latest)
	call(t, "GET", sr+"/subjects/"+subject+"/versions/1", "", &first)
	name, _ := topics.SchemaFor(strings.TrimSuffix(subject, "-value"))
	cur, err := schemas.Current(name)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Subject != subject || latest.Version != versions[len(versions)-1] || latest.ID != cur.ID || first.ID == latest.ID {
		t.Fatalf("latest %+v, first %+v", latest, first)
	}
	// The schema text is self-contained Avro whose canonical form is the
	// current schema's.
	if fp := fingerprintOf(t, latest.Schema); fp != cur.Fingerprint {
		t.Fatalf("latest's schema has fingerprint %x, the current schema %x", fp, cur.Fingerprint)
	}

	var byID struct {
		Schema string `json:"schema"`
	}
	if code, body := call(t, "GET", fmt.Sprint(sr, "/schemas/ids/", latest.ID), "", &byID); code != 200 || byID.Schema != latest.Schema {
		t.Fatalf("by id: %d %s", code, body)
	}
	if code, body := call(t, "GET", fmt.Sprint(sr, "/schemas/ids/", latest.ID, "/schema"), "", nil); code != 200 || body != latest.Schema {
		t.Fatalf("raw schema by id: %d %s", code, body)
	}

	var uses []subjectUse
	if code, body := call(t, "GET", fmt.Sprint(sr, "/schemas/ids/", latest.ID, "/versions"), "", &uses); code != 200 ||
		!slices.Contains(uses, subjectUse{Subject: subject, Version: latest.Version}) {
		t.Fatalf("versions of id %d: %d %s", latest.ID, code, body)
	}

	// Errors carry Confluent's codes.
	for _, c := range []struct {
		method, path, body string
		status, code       int
	}{
		{"GET", "/subjects/no.such.topic-value/versions", "", 404, 40401},
		// a client without an epoch has no feed, so no subject
		{"GET", "/subjects/saas.nobody-value/versions", "", 404, 40401},
		{"GET", "/subjects/yt.nobody-value/versions/latest", "", 404, 40401},
		{"GET", "/subjects/" + strings.TrimSuffix(subject, "-value") + "-key/versions", "", 404, 40401},
		{"GET", "/subjects/" + subject + "/versions/999", "", 404, 40402},
		{"GET", "/subjects/" + subject + "/versions/zero", "", 422, 42202},
		{"GET", "/schemas/ids/1", "", 404, 40403},
		{"POST", "/subjects/" + subject, `{"schema":"{\"type\":\"record\",\"name\":\"X\",\"fields\":[]}"}`, 404, 40403},
		{"POST", "/subjects/" + subject, `{"schema":"not avro"}`, 422, 42201},
		// A schema dropping a required field without default cannot read the latest's data.
		{"POST", "/subjects/" + subject + "/versions", `{"schema":"{\"type\":\"record\",\"name\":\"X\",\"fields\":[{\"name\":\"extra\",\"type\":\"string\"}]}"}`, 409, 409},
	} {
		var e api.RegistryError
		if code, body := call(t, c.method, sr+c.path, c.body, &e); code != c.status || e.Code != c.code || e.Message == "" {
			t.Errorf("%s %s: %d %s, want %d with error_code %d", c.method, c.path, code, body, c.status, c.code)
		}
	}

	// Looking up and registering a known schema answer its version and id,
	// whatever its whitespace or docs.
	req, _ := json.Marshal(map[string]string{"schema": latest.Schema})
	var found api.SubjectVersion
	if code, body := call(t, "POST", sr+"/subjects/"+subject, string(req), &found); code != 200 || found.ID != latest.ID || found.Version != latest.Version {
		t.Fatalf("lookup: %d %s", code, body)
	}
	var registered struct {
		ID int32 `json:"id"`
	}
	if code, body := call(t, "POST", sr+"/subjects/"+subject+"/versions", string(req), &registered); code != 200 || registered.ID != latest.ID {
		t.Fatalf("register: %d %s", code, body)
	}

	// A writer's schema with a field of its own (no default): offerlog's
	// processors read its data, but it cannot read the latest's, so the
	// default level (BACKWARD, as Confluent's) refuses it; FORWARD, set on
	// the subject, takes it.
	var latestSchema map[string]any
	if err := json.Unmarshal([]byte(latest.Schema), &latestSchema); err != nil {
		t.Fatal(err)
	}
	latestSchema["fields"] = append(latestSchema["fields"].([]any), map[string]any{"name": "producer_note", "type": "string"})
	writer, _ := json.Marshal(latestSchema)
	writerReq, _ := json.Marshal(map[string]string{"schema": string(writer)})
	var level map[string]string
	if code, body := call(t, "GET", sr+"/config/"+subject, "", &level); code != 200 || level["compatibilityLevel"] != "BACKWARD" {
		t.Fatalf("config of %s: %d %s", subject, code, body)
	}
	var e api.RegistryError
	if code, body := call(t, "POST", sr+"/subjects/"+subject+"/versions", string(writerReq), &e); code != 409 || e.Code != 409 || !strings.Contains(e.Message, "BACKWARD") {
		t.Fatalf("a writer's schema under BACKWARD: %d %s", code, body)
	}
	if code, body := call(t, "PUT", sr+"/config/"+subject, `{"compatibility":"SIDEWAYS"}`, &e); code != 422 || e.Code != 42203 {
		t.Fatalf("an unknown level: %d %s", code, body)
	}
	if code, body := call(t, "PUT", sr+"/config/"+subject, `{"compatibility":"FORWARD"}`, &level); code != 200 || level["compatibility"] != "FORWARD" {
		t.Fatalf("set FORWARD: %d %s", code, body)
	}
	if code, body := call(t, "GET", sr+"/config/"+subject, "", &level); code != 200 || level["compatibilityLevel"] != "FORWARD" {
		t.Fatalf("config after setting it: %d %s", code, body)
	}
	if code, body := call(t, "POST", sr+"/subjects/"+subject+"/versions", string(writerReq), &registered); code != 200 || registered.ID == latest.ID || registered.ID == 0 {
		t.Fatalf("a writer's schema under FORWARD: %d %s", code, body)
	}
	// One offerlog cannot read is refused whatever the level.
	if code, body := call(t, "PUT", sr+"/config/"+subject, `{"compatibility":"NONE"}`, &level); code != 200 {
		t.Fatalf("set NONE: %d %s", code, body)
	}
	if code, body := call(t, "POST", sr+"/subjects/"+subject+"/versions",
		`{"schema":"{\"type\":\"record\",\"name\":\"X\",\"fields\":[{\"name\":\"extra\",\"type\":\"string\"}]}"}`, &e); code != 409 || !strings.Contains(e.Message, "offerlog's processors") {
		t.Fatalf("a schema offerlog cannot read, under NONE: %d %s", code, body)
	}

	// A single-object header's fingerprint names its schema, the legacy
	// ones too.
	frame, err := schemas.Verdicts.Encode(&schemas.Verdict{Verdict: schemas.Accepted})
	if err != nil {
		t.Fatal(err)
	}
	fp := binary.LittleEndian.Uint64(frame[2:10])
	verdict, err := schemas.Current(schemas.VerdictName)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{fmt.Sprintf("%016x", fp), fmt.Sprint(int64(fp)), fmt.Sprintf("%016x", verdict.LegacyFingerprint)} {
		var got api.FingerprintSchema
		if code, body := call(t, "GET", base+"/v1/schemas/"+q, "", &got); code != 200 || got.Name != schemas.VerdictName {
			t.Fatalf("fingerprint %s: %d %s", q, code, body)
		}
	}
	var apiErr api.Error
	if code, _ := call(t, "GET", base+"/v1/schemas/0000000000000001", "", &apiErr); code != 404 || apiErr.Error == "" {
		t.Fatalf("unknown fingerprint: %d %+v", code, apiErr)
	}
}

// subjectUse is an entry of GET /schemas/ids/{id}/versions.
type subjectUse struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// fingerprintOf parses schema text and returns its spec fingerprint.
func fingerprintOf(t *testing.T, text string) uint64 {
	t.Helper()
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Fingerprint(s)
}
