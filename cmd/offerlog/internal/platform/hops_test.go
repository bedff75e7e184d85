package platform_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
)

// TestWriteHopsOnMetrics writes a document with ?wait=true and updates an
// offer through the HTTP API, then reads /metrics: every hop of both write
// paths was observed once at least (append, verdict, reply; append,
// command, answer, reply, view).
func TestWriteHopsOnMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	s := startSecured(t)
	seller, _ := s.token("seller", "s1")
	code, b := s.call("PUT", "/v1/clients/shop/epochs/1", `{"fields":[{"name":"title","type":"string","required":true}]}`, s.admin)
	s.must("epoch", code, b, http.StatusCreated)
	doc := `{"pk":"1","epoch":1,"version":1,"action":"UPSERT","timestamp":"2026-11-24T10:00:00Z","fields":{"title":"bike"}}`
	code, b = s.call("POST", "/v1/clients/shop/documents?wait=true", doc, s.admin)
	s.must("document", code, b, http.StatusOK)
	var d schemas.Draft
	code, b = s.call("POST", "/v1/drafts/current", `{"category":"cars"}`, seller)
	if err := json.Unmarshal([]byte(s.must("draft", code, b, http.StatusOK)), &d); err != nil {
		t.Fatal(err)
	}
	code, b = s.call("PUT", "/v1/drafts/"+d.ID, `{"offer":`+secOffer+`}`, seller)
	s.must("draft content", code, b, http.StatusOK)
	code, b = s.call("POST", "/v1/drafts/"+d.ID+"/publish", `{}`, seller)
	s.must("publish", code, b, http.StatusCreated)
	code, b = s.call("PUT", "/v1/offers/"+d.ID, `{"expected_version":-1,"offer":`+secOffer+`}`, seller)
	s.must("update", code, b, http.StatusOK)

	// The reply hop of an offer is its answer's transit to the matcher of
	// offers.results, which may read it after the write was answered in
	// process: every hop is waited for, not read once.
	hops := []string{`hop="append",path="document"`, `hop="verdict",path="document"`, `hop="reply",path="document"`,
		`hop="append",path="offer"`, `hop="command",path="offer"`, `hop="answer",path="offer"`, `hop="reply",path="offer"`,
		`hop="view",path="offer"`}
	var missing []string
	observed := func() bool {
		code, b := s.call("GET", "/metrics", "", "")
		s.must("metrics", code, b, http.StatusOK)
		missing = missing[:0]
		for _, hop := range hops {
			series := "offerlog_write_hop_seconds_count{" + hop + "}"
			i := strings.Index(b, series)
			if i < 0 || strings.Fields(b[i+len(series):])[0] == "0" {
				missing = append(missing, series)
			}
		}
		return len(missing) == 0
	}
	defer func() {
		if t.Failed() {
			t.Logf("not observed: %v", missing)
		}
	}()
	testkit.Eventually(t, 30*time.Second, "every hop observed", observed)
}
