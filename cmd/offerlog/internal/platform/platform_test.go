package platform_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/topics"
)

// running is a platform started by a test.
type running struct {
	*platformtest.Running
	info platform.Info
}

func start(t *testing.T, dataDir string) *running {
	t.Helper()
	cfg := platformtest.Config(dataDir)
	cfg.Cache.Table = string(topics.RegistryTable)
	cfg.EpochGrace = time.Second
	r := platformtest.Start(t, cfg)
	return &running{Running: r, info: r.Info}
}

func (r *running) url(path string) string { return "http://" + r.info.HTTPAddr + path }

// call sends a request and returns the status and the body.
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func expect(t *testing.T, what string, status int, body string, wantStatus int, wantBody string) {
	t.Helper()
	if status != wantStatus || !strings.Contains(body, wantBody) {
		t.Fatalf("%s: got %d %s, want %d containing %q", what, status, body, wantStatus, wantBody)
	}
}

const epochBody = `{"fields":[{"name":"title","type":"string","required":true},{"name":"price","type":"int64"},
	{"name":"tags","type":"string_list"}],"embeddings":[{"name":"vec","dimension":2}]}`

// docTime is the timestamp of every document of the test, so that posting
// the same version twice is a duplicate.
var docTime = time.Now().UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)

func docBody(pk string, version int64, extra string) string {
	return fmt.Sprintf(`{"pk":%q,"version":%d,"epoch":1,"action":"UPSERT","timestamp":%q,
		"fields":{"title":"bike %d","price":120,"tags":["a","b"]%s},"embeddings":{"vec":[0.5,1]}}`,
		pk, version, docTime, version, extra)
}

func TestAPIEndToEndAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	data := t.TempDir()
	p := start(t, data)

	s, b := call(t, "PUT", p.url("/v1/clients/shop/epochs/1"), epochBody)
	expect(t, "register epoch", s, b, http.StatusCreated, `"epoch":1`)
	s, b = call(t, "PUT", p.url("/v1/clients/shop/epochs/1"), epochBody)
	expect(t, "register the same epoch again", s, b, http.StatusOK, `"epoch":1`)
	s, b = call(t, "PUT", p.url("/v1/clients/shop/epochs/1"), `{"fields":[{"name":"title","type":"int64"}]}`)
	expect(t, "change a registered epoch", s, b, http.StatusConflict, "different schema")
	s, b = call(t, "PUT", p.url("/v1/clients/shop/epochs/1"), strings.Replace(epochBody, `{"fields"`, `{"analyzer":"english","fields"`, 1))
	expect(t, "change a registered epoch's analyzer", s, b, http.StatusConflict, "different schema")
	s, b = call(t, "PUT", p.url("/v1/clients/shop/epochs/2"), `{"fields":[{"name":"title","type":"text"}]}`)
	expect(t, "unknown field type", s, b, http.StatusUnprocessableEntity, `"field":"fields[0].type"`)
	s, b = call(t, "PUT", p.url("/v1/clients/Bad!/epochs/1"), epochBody)
	expect(t, "bad client name", s, b, http.StatusUnprocessableEntity, `"field":"client"`)

	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), docBody("1", 2, ""))
	expect(t, "post a document", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), docBody("1", 1, ""))
	expect(t, "post an older version", s, b, http.StatusConflict, `"verdict":"STALE"`)
	// The seed's ACK is the verdict: a plain post waits for it; only
	// ?async=true (or the old ?wait=false) answers 202 once appended.
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents"), docBody("1", 1, ""))
	expect(t, "a plain post of an older version", s, b, http.StatusConflict, `"verdict":"STALE"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?async=true"), docBody("2", 1, ""))
	expect(t, "post without waiting", s, b, http.StatusAccepted, `"offset"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=false"), docBody("2", 1, ""))
	expect(t, "post with the old spelling of async", s, b, http.StatusAccepted, `"offset"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?async=maybe"), docBody("2", 1, ""))
	expect(t, "async neither true nor false", s, b, http.StatusBadRequest, `"field":"async"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?async=true&wait=true"), docBody("2", 1, ""))
	expect(t, "async and wait at once", s, b, http.StatusBadRequest, `contradicts`)
	// The emergency queue: an urgent post is decided as any other, and its
	// change is on documents.urgent too.
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?priority=urgent"), docBody("9", 1, ""))
	expect(t, "an urgent post", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?priority=fast"), docBody("9", 2, ""))
	expect(t, "an unknown priority", s, b, http.StatusBadRequest, `"field":"priority"`)
	if urgent := testkit.ReadAll(t, p.info.Brokers, topics.DocumentsUrgent); len(urgent) != 1 || string(urgent[0].Key) != "shop/9" {
		t.Errorf("documents.urgent holds %d records, want the urgent post's change", len(urgent))
	}
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), docBody("3", 1, `,"colour":"red"`))
	expect(t, "undeclared field", s, b, http.StatusUnprocessableEntity, `"field":"fields.colour"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), strings.Replace(docBody("3", 1, ""), `"price":120`, `"price":"cheap"`, 1))
	expect(t, "wrong type", s, b, http.StatusUnprocessableEntity, `"field":"fields.price"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), strings.Replace(docBody("3", 1, ""), `[0.5,1]`, `[0.5]`, 1))
	expect(t, "wrong dimension", s, b, http.StatusUnprocessableEntity, "dimension 1")
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), strings.Replace(docBody("3", 1, ""), `"epoch":1`, `"epoch":9`, 1))
	expect(t, "unknown epoch", s, b, http.StatusUnprocessableEntity, `"field":"epoch"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), `{"pk":`)
	expect(t, "malformed JSON", s, b, http.StatusBadRequest, "malformed JSON")
	big := docBody("4", 1, fmt.Sprintf(`,"tags2":%q`, strings.Repeat("x", 500_000)))
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), big)
	expect(t, "oversized body", s, b, http.StatusRequestEntityTooLarge, "larger than")
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"),
		fmt.Sprintf(`{"pk":"1","version":5,"epoch":1,"action":"DELETE","timestamp":%q}`, time.Now().UTC().Format(time.RFC3339Nano)))
	expect(t, "delete", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)

	// The serving cache holds the registry's table too.
	cache := serving.NewClient(serving.ClientConfig{Hosts: serving.StaticHosts(p.info.CacheAddr), Logger: testkit.Logger()})
	testkit.Eventually(t, 30*time.Second, "document 2 in the cache", func() bool {
		cache.Ping(context.Background())
		got, err := cache.Get(context.Background(), []string{"shop/2", "shop/none"})
		if err != nil || len(got) != 1 {
			return false
		}
		var rec schemas.RegistryRecord
		return schemas.RegistryRecords.Decode(got["shop/2"], &rec) == nil && rec.PK == "2"
	})

	testkit.Eventually(t, 30*time.Second, "document 2 in the registry", func() bool {
		s, _ := call(t, "GET", p.url("/v1/clients/shop/documents/2"), "")
		return s == http.StatusOK
	})
	s, b = call(t, "GET", p.url("/v1/clients/shop/documents/2"), "")
	expect(t, "read a document", s, b, http.StatusOK, `"title":"bike 1"`)
	// Reads go to a view of the registry's table: they follow a verdict
	// within moments, not at once.
	testkit.Eventually(t, 30*time.Second, "the tombstone of document 1 in the view", func() bool {
		_, b := call(t, "GET", p.url("/v1/clients/shop/documents/1"), "")
		return strings.Contains(b, `"status":"TOMBSTONE"`)
	})
	s, b = call(t, "GET", p.url("/v1/clients/shop/documents/nope"), "")
	expect(t, "read a missing document", s, b, http.StatusNotFound, "no document")
	s, b = call(t, "GET", p.url("/metrics"), "")
	expect(t, "metrics", s, b, http.StatusOK, `offerlog_registry_verdicts_total{verdict="ACCEPTED"}`)
	// The views a component runs itself are watched as the process's own.
	expect(t, "the scheduler's view's staleness", s, b, http.StatusOK, `offerlog_view_staleness_seconds{view="scheduler-offers"}`)
	// The lag, computed in the background by the lag component, is one
	// series per group, topic and partition, and concurrent scrapes are
	// served.
	testkit.Eventually(t, 30*time.Second, "the registry's lag on /metrics", func() bool {
		_, b := call(t, "GET", p.url("/metrics"), "")
		return strings.Contains(b, `offerlog_kafka_consumer_group_topic_partition_lag{group_id="registry",partition_id="0",topic_name="documents.ingest"}`) &&
			strings.Contains(b, `offerlog_kafka_consumer_group_topic_lag_seconds{group_id="registry",topic_name="documents.ingest"}`)
	})
	var scrapes sync.WaitGroup
	for range 8 {
		scrapes.Go(func() { // not call: t.Fatal belongs to the test's goroutine
			resp, err := http.Get(p.url("/metrics"))
			if err != nil {
				t.Error(err)
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			s, b := resp.StatusCode, string(raw)
			seen := map[string]bool{}
			for _, line := range strings.Split(b, "\n") {
				series, _, _ := strings.Cut(line, " ")
				if strings.HasPrefix(line, "offerlog_kafka_consumer_group_") && seen[series] {
					t.Errorf("lag series %s listed twice", series)
				}
				seen[series] = true
			}
			if s != http.StatusOK {
				t.Errorf("concurrent scrape: %d", s)
			}
		})
	}
	scrapes.Wait()
	s, b = call(t, "GET", p.url("/readyz"), "")
	expect(t, "ready", s, b, http.StatusOK, "ready")

	// The search feed ends with the delete of 1 and the upsert of 2.
	testkit.Eventually(t, 30*time.Second, "the search feed", func() bool {
		last := testkit.LastSaas(t, p.info.Brokers, "shop")
		return last["shop/1"].Action == schemas.ActionDelete && last["shop/2"].Version == 1
	})

	// Stop, start again on the same data: everything is still there.
	if err := p.Stop(); err != nil {
		t.Fatalf("clean shutdown: %v", err)
	}
	p = start(t, data)
	testkit.Eventually(t, 30*time.Second, "document 2 after the restart", func() bool {
		s, b := call(t, "GET", p.url("/v1/clients/shop/documents/2"), "")
		return s == http.StatusOK && strings.Contains(b, `"title":"bike 1"`)
	})
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), docBody("2", 1, ""))
	expect(t, "the same version after restart", s, b, http.StatusOK, "duplicate")
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), docBody("2", 2, ""))
	expect(t, "a newer version after restart", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	if err := p.Stop(); err != nil {
		t.Fatalf("clean shutdown: %v", err)
	}
}
