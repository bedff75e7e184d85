package platform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"

	"github.com/offerlog/offerlog/schemas"
)

// TestAnswersFitTheOpenAPIDescription sends requests to every kind of
// route of a platform (auth on) and validates each answer, success and
// error alike, against /openapi.json as the server serves it.
func TestAnswersFitTheOpenAPIDescription(t *testing.T) {
	s := startSecured(t)
	resp, err := http.Get("http://" + s.Info.HTTPAddr + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("/openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("/openapi.json: %v", err)
	}
	router, err := legacyrouter.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	seller, _ := s.token("seller", "s1")
	validated := map[string]bool{}
	check := func(method, path, body, token string) string {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+s.Info.HTTPAddr+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s: not in the description: %v", method, path, err)
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(got)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			t.Errorf("%s %s answered %d %s, which the description does not allow: %v", method, path, resp.StatusCode, got, err)
		}
		validated[route.Method+" "+route.Path] = true
		if resp.StatusCode >= 400 && goInternals.Match(got) {
			t.Errorf("%s %s answered %d with Go's own words: %s", method, path, resp.StatusCode, got)
		}
		return string(got)
	}
	admin := s.admin
	check("GET", "/healthz", "", "")
	check("GET", "/readyz", "", "")
	check("GET", "/metrics", "", "")
	check("GET", "/v1/clients/shop/epochs", "", "")     // 401
	check("GET", "/v1/clients/shop/epochs", "", seller) // 403
	check("GET", "/v1/clients/shop/epochs", "", admin)  // 404
	check("PUT", "/v1/clients/shop/epochs/1", `{"fields":[{"name":"title","type":"string","required":true}]}`, admin)
	check("PUT", "/v1/clients/shop/epochs/1", `{"fields":[{"name":"title","type":"string","required":true}]}`, admin) // 200
	check("PUT", "/v1/clients/shop/epochs/x", `{}`, admin)                                                            // 400
	check("GET", "/v1/clients/shop/epochs", "", admin)
	doc1 := `{"pk":"1","epoch":1,"version":1,"action":"UPSERT","timestamp":"2026-11-24T10:00:00Z","fields":{"title":"bike"}}`
	var async, stale struct {
		Partition int32
		Offset    int64
	}
	if err := json.Unmarshal([]byte(check("POST", "/v1/clients/shop/documents", doc1, admin)), &async); err != nil {
		t.Fatal(err)
	}
	check("POST", "/v1/clients/shop/documents?wait=true", strings.Replace(doc1, `"version":1`, `"version":2`, 1), admin)
	if err := json.Unmarshal([]byte(check("POST", "/v1/clients/shop/documents?wait=true", doc1, admin)), &stale); err != nil { // 409 stale
		t.Fatal(err)
	}
	// The verdicts, by the positions the posts were answered.
	verdict := func(p int32, o int64) string { return fmt.Sprintf("/v1/clients/shop/verdicts/%d/%d", p, o) }
	if b := check("GET", verdict(async.Partition, async.Offset), "", admin); !strings.Contains(b, `"verdict":"ACCEPTED"`) || !strings.Contains(b, `"pk":"1"`) {
		t.Errorf("the async post's verdict: %s", b)
	}
	if b := check("GET", verdict(stale.Partition, stale.Offset), "", admin); !strings.Contains(b, `"verdict":"STALE"`) {
		t.Errorf("the stale post's verdict: %s", b)
	}
	if b := check("GET", strings.Replace(verdict(async.Partition, async.Offset), "shop", "other", 1), "", admin); !strings.Contains(b, "no post of other") {
		t.Errorf("another client's position: %s", b) // 404
	}
	check("GET", verdict(async.Partition, 1<<40), "", admin)         // 404
	check("GET", "/v1/clients/shop/verdicts/x/1", "", admin)         // 400
	check("GET", verdict(async.Partition, async.Offset), "", seller) // 403
	check("POST", "/v1/clients/shop/documents", `{"pk":"1"}`, admin) // 400
	check("GET", "/v1/clients/shop/documents/1", "", admin)
	check("GET", "/v1/clients/shop/documents/nosuch", "", admin)
	check("POST", "/v1/clients/shop/search", `{"query":"x","min_version":{"pk":"1","version":2}}`, admin)
	check("POST", "/v1/clients/shop/search", `{"query":"x","limit":5000}`, admin) // 422
	check("GET", "/v1/clients/shop/search?q=x", "", admin)
	check("GET", "/v1/clients/nosuch/search?q=x", "", admin) // 404
	if b := check("GET", "/v1/numerator/check?state=0.0.1.7&data=0.0.1.5", "", seller); !strings.Contains(b, "no state 0.0.1.7") {
		t.Errorf("a state the cluster has not: %s", b)
	}
	if b := check("GET", "/v1/numerator/check?state=0.0.2.7&data=0.0.1.5", "", seller); !strings.Contains(b, `"usable":false`) || !strings.Contains(b, "renumbered") {
		t.Errorf("data of another rebuild: %s", b)
	}
	check("GET", "/v1/numerator/check?state=0.0.x&data=0.0.1.5", "", seller) // 422
	check("GET", "/v1/numerator/states", "", seller)
	if b := check("GET", "/v1/numerator/shard?scheme=2&key=7/sku-1/1/2", "", seller); !strings.Contains(b, `"shards":16`) {
		t.Errorf("the shard of a key: %s", b)
	}
	if b := check("GET", "/v1/numerator/shard?state=0.1.4.9&key=7/sku-1/1/2", "", seller); !strings.Contains(b, `"scheme":1`) {
		t.Errorf("the shard of a key under a state: %s", b)
	}
	check("GET", "/v1/numerator/shard?scheme=9&key=7/sku-1/1/2", "", seller)  // 422
	check("GET", "/v1/numerator/shard?scheme=0&key=7", "", seller)            // 422
	check("GET", "/v1/numerator/states/0.0.9.9/keys/7/sku-1/1/2", "", seller) // 404
	check("GET", "/v1/numerator/states/x/keys/7/sku-1/1/2", "", seller)       // 422
	var d schemas.Draft
	if err := json.Unmarshal([]byte(check("POST", "/v1/drafts/current", `{"category":"cars"}`, seller)), &d); err != nil {
		t.Fatal(err)
	}
	check("PUT", "/v1/drafts/"+d.ID, `{"offer":`+secOffer+`}`, seller)
	check("POST", "/v1/drafts/"+d.ID+"/publish", `{}`, seller)
	check("POST", "/v1/drafts/99999999999/publish", `{}`, seller) // 404
	check("GET", "/v1/offers/"+d.ID, "", seller)
	check("GET", "/v1/offers/"+d.ID+"/stages", "", seller)
	check("PUT", "/v1/offers/"+d.ID, `{"expected_version":-1,"offer":`+secOffer+`}`, seller)
	check("PUT", "/v1/offers/"+d.ID, `{"expected_version":1,"offer":`+secOffer+`}`, seller)  // 409
	check("PUT", "/v1/offers/"+d.ID, `{"expected_version":-1,"offer":{"title":""}}`, seller) // 422
	check("GET", "/v1/sellers/s1/offers?preset=all&limit=10", "", seller)
	check("GET", "/v1/sellers/s1/counters", "", seller)
	check("POST", "/v1/sellers/s1/feeds/1", `{"external_id":"e1","offer":`+secOffer+`}`, seller)
	check("POST", "/v1/sellers/s1/feeds/1", `{"external_id":`, seller) // 400
	check("POST", "/v1/sellers/s1/feeds/1/finish", `{"failed":true}`, seller)
	check("GET", "/v1/sellers/s1/feeds/1", "", seller)
	check("GET", "/v1/sellers/s1/feeds/99", "", seller) // 404
	check("DELETE", "/v1/offers/"+d.ID+"?expected_version=-1", "", seller)
	check("GET", "/v1/offers/"+d.ID, "", seller)           // 404
	check("GET", "/v1/offers/"+d.ID+"/stages", "", seller) // 404
	check("GET", "/schema-registry/subjects", "", seller)
	check("GET", "/schema-registry/subjects/offers.events-value/versions", "", seller)
	check("GET", "/schema-registry/subjects/offers.events-value/versions/latest", "", seller)
	check("GET", "/schema-registry/subjects/offers.events-value/versions/latest/schema", "", seller)
	check("GET", "/schema-registry/subjects/nosuch-value/versions", "", seller) // 404
	check("GET", "/schema-registry/schemas/types", "", seller)
	check("GET", "/schema-registry/config", "", seller)
	check("GET", "/schema-registry/config/offers.events-value", "", seller)
	check("PUT", "/schema-registry/config/offers.events-value", `{"compatibility":"FULL"}`, admin)
	check("PUT", "/schema-registry/config/offers.events-value", `{"compatibility":"SIDEWAYS"}`, admin) // 422
	check("PUT", "/schema-registry/config", `{"compatibility":"BACKWARD"}`, admin)
	sch, _ := schemas.Current(schemas.OfferEventName)
	id := strings.TrimSpace(string(must(json.Marshal(sch.ID))))
	check("GET", "/schema-registry/schemas/ids/"+id, "", seller)
	check("GET", "/schema-registry/schemas/ids/"+id+"/schema", "", seller)
	check("GET", "/schema-registry/schemas/ids/"+id+"/versions", "", seller)
	text := string(must(json.Marshal(map[string]string{"schema": sch.Text})))
	check("POST", "/schema-registry/subjects/offers.events-value", text, seller)
	check("POST", "/schema-registry/subjects/offers.events-value/versions", text, admin)
	check("POST", "/schema-registry/subjects/offers.events-value/versions", `{"schema":"\"string\""}`, admin) // 409
	check("GET", "/v1/schemas/"+must2(sch.Fingerprint), "", seller)
	check("GET", "/openapi.json", "", "")
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !validated[method+" "+path] {
				t.Errorf("no answer of %s %s was validated", method, path)
			}
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func must2(fp uint64) string { return strconv.FormatUint(fp, 16) }
