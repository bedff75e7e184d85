package platform_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// TestReadsThroughTheCache runs the API with --reads cache and auth on, and
// a cache of offers-table and registry-table in the process (no indexer,
// whose view of the registry would be there anyway): the API holds no view
// of either table, and reads offers and documents through the serving cache
// (over gRPC, with the admin token of the data directory). A document is
// read right after its verdict; a GET of an offer with min_version waits
// for the version a write answered, and one beyond anything written
// answers 504; the seller's list reads its page through the cache too;
// an offer sold is archived a second later and read through the cache's
// servers of offers.archive.
func TestReadsThroughTheCache(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	var dataDir string
	s := startSecured(t, func(c *platform.Config) {
		c.Reads, c.Cache.Table, c.WaitTimeout = platform.ReadsCache, string(topics.OffersTable+","+topics.RegistryTable+","+topics.OffersArchive), 3*time.Second
		c.ArchiveAfter = time.Second
		c.Components = slices.DeleteFunc(slices.Clone(platform.AllComponents()), func(name string) bool {
			return name == platform.ComponentIndexer || name == platform.ComponentSinkYDB
		})
		dataDir = c.DataDir
	})
	for _, view := range []string{string("api-" + topics.OffersTable), "registry-" + platform.ComponentAPI} {
		if _, err := os.Stat(filepath.Join(dataDir, "state", "view", view)); err == nil {
			t.Errorf("the API keeps a view (%s) with --reads cache", view)
		}
	}
	seller, _ := s.token("seller", "s1")

	code, b := s.call("PUT", "/v1/clients/shop/epochs/1", `{"fields":[{"name":"title","type":"string","required":true}]}`, s.admin)
	s.must("epoch", code, b, http.StatusCreated)
	for v := 1; v <= 3; v++ {
		doc := fmt.Sprintf(`{"pk":"1","epoch":1,"version":%d,"action":"UPSERT","timestamp":"2026-11-24T10:00:00Z","fields":{"title":"bike %d"}}`, v, v)
		code, b = s.call("POST", "/v1/clients/shop/documents?wait=true", doc, s.admin)
		s.must("document", code, b, http.StatusOK)
		code, b = s.call("GET", fmt.Sprintf("/v1/clients/shop/documents/1?min_version=%d", v), "", s.admin)
		if !strings.Contains(s.must("document read", code, b, http.StatusOK), fmt.Sprintf("bike %d", v)) {
			t.Fatalf("the read after version %d's verdict: %s", v, b)
		}
	}
	code, b = s.call("GET", "/v1/clients/shop/documents/2", "", s.admin)
	s.must("unknown document", code, b, http.StatusNotFound)
	var d schemas.Draft
	code, b = s.call("POST", "/v1/drafts/current", `{"category":"cars"}`, seller)
	if err := json.Unmarshal([]byte(s.must("draft", code, b, http.StatusOK)), &d); err != nil {
		t.Fatal(err)
	}
	code, b = s.call("PUT", "/v1/drafts/"+d.ID, `{"offer":`+secOffer+`}`, seller)
	s.must("draft content", code, b, http.StatusOK)
	code, b = s.call("POST", "/v1/drafts/"+d.ID+"/publish", `{}`, seller)
	s.must("publish", code, b, http.StatusCreated)
	var written struct {
		Version int64         `json:"version"`
		Offer   schemas.Offer `json:"offer"`
	}
	for i := range 3 {
		body := strings.Replace(secOffer, "Lada Niva", fmt.Sprintf("Lada Niva %d", i), 1)
		code, b = s.call("PUT", "/v1/offers/"+d.ID, `{"expected_version":-1,"offer":`+body+`}`, seller)
		if err := json.Unmarshal([]byte(s.must("update", code, b, http.StatusOK)), &written); err != nil {
			t.Fatal(err)
		}
		// The write's answer waited for the cache to show it.
		if written.Offer.Title != fmt.Sprintf("Lada Niva %d", i) {
			t.Fatalf("update %d answered %s", i, b)
		}
		code, b = s.call("GET", fmt.Sprintf("/v1/offers/%s?min_version=%d", d.ID, written.Version), "", seller)
		var read struct {
			Version int64         `json:"version"`
			Offer   schemas.Offer `json:"offer"`
		}
		if err := json.Unmarshal([]byte(s.must("read", code, b, http.StatusOK)), &read); err != nil {
			t.Fatal(err)
		}
		if read.Version < written.Version || read.Offer.Title != written.Offer.Title {
			t.Fatalf("read after write %d (version %d): %s", i, written.Version, b)
		}
	}
	code, b = s.call("GET", fmt.Sprintf("/v1/offers/%s?min_version=%d", d.ID, written.Version+100), "", seller)
	s.must("read of a version not written", code, b, http.StatusGatewayTimeout)
	if !strings.Contains(b, `"min_version"`) {
		t.Fatalf("the 504 does not name min_version: %s", b)
	}
	code, b = s.call("GET", "/v1/offers/"+d.ID+"?min_version=x", "", seller)
	s.must("bad min_version", code, b, http.StatusBadRequest)
	code, b = s.call("GET", "/v1/offers/999999999", "", seller)
	s.must("unknown offer", code, b, http.StatusNotFound)

	code, b = s.call("GET", "/v1/sellers/s1/offers", "", seller)
	if !strings.Contains(s.must("list", code, b, http.StatusOK), "Lada Niva 2") {
		t.Fatalf("the list does not hold the offer: %s", b)
	}

	// Sold, the offer is archived a second later, and read through the
	// cache's servers of offers.archive.
	body := strings.Replace(secOffer, `"currency"`, `"status":"SOLD","currency"`, 1)
	code, b = s.call("PUT", "/v1/offers/"+d.ID, `{"expected_version":-1,"offer":`+body+`}`, seller)
	s.must("sale", code, b, http.StatusOK)
	testkit.Eventually(t, 30*time.Second, "the sold offer read from the archive", func() bool {
		code, b = s.call("GET", "/v1/offers/"+d.ID, "", seller)
		return code == http.StatusOK && strings.Contains(b, `"archived":true`) && testkit.Table(t, s.kafka, topics.OffersTable)[d.ID] == nil
	})
}
