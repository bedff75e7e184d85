package platform_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/offerlog/offerlog/serving/search"
)

// TestSearchThroughTheAPI: documents posted to the API are found by the
// searcher of the same process through its routes, by words, a range and
// a vector, read-your-writes by min_version; a newer version replaces the
// older, a delete removes; a bad query is 422 naming its member, an
// unknown client 404, a wait that runs out 504.
func TestSearchThroughTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	p := start(t, t.TempDir())
	s, b := call(t, "PUT", p.url("/v1/clients/shop/epochs/1"), epochBody)
	expect(t, "register epoch", s, b, http.StatusCreated, `"epoch":1`)
	post := func(pk string, version int64, title string, price int, vec string) {
		t.Helper()
		body := fmt.Sprintf(`{"pk":%q,"version":%d,"epoch":1,"action":"UPSERT","timestamp":%q,"fields":{"title":%q,"price":%d,"tags":["t"]},"embeddings":{"vec":%s}}`,
			pk, version, docTime, title, price, vec)
		s, b := call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), body)
		expect(t, "post "+pk, s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	}
	post("1", 1, "red bicycle", 300, "[1,0]")
	post("2", 1, "blue bicycle", 500, "[0.9,0.1]")
	post("3", 1, "red car", 9000, "[0,1]")
	find := func(what, body string, want ...string) {
		t.Helper()
		s, b := call(t, "POST", p.url("/v1/clients/shop/search"), body)
		expect(t, what, s, b, http.StatusOK, `"hits"`)
		var r search.Result
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range r.Hits {
			got = append(got, h.PK)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v (%s)", what, got, want, b)
		}
	}
	find("words, after the last post", `{"query":"bicycle","sort":[{"field":"price"}],"min_version":{"pk":"2","version":1}}`, "1", "2")
	find("a range", `{"filters":[{"field":"price","gte":400}],"sort":[{"field":"price","order":"desc"}],"min_version":{"pk":"3","version":1}}`, "3", "2")
	find("a vector", `{"knn":{"field":"vec","vector":[0,1],"k":1}}`, "3")
	post("1", 2, "red tricycle", 310, "[1,0]")
	find("the newer version", `{"query":"red","min_version":{"pk":"1","version":2},"sort":[{"field":"price"}]}`, "1", "3")
	s, b = call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"),
		fmt.Sprintf(`{"pk":"3","version":2,"epoch":1,"action":"DELETE","timestamp":%q}`, docTime))
	expect(t, "delete 3", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	find("after the delete", `{"query":"red","min_version":{"pk":"3","version":2}}`, "1")

	s, b = call(t, "GET", p.url("/v1/clients/shop/search?q=bicycle"), "")
	expect(t, "the simple GET", s, b, http.StatusOK, `"pk":"2"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/search"), `{"knn":{"field":"vec","vector":[1,2,3],"k":1}}`)
	expect(t, "a vector of the wrong dimension", s, b, http.StatusUnprocessableEntity, `"field":"knn.vector"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/search"), `{"query":"x","limit":5000}`)
	expect(t, "a limit over 1000", s, b, http.StatusUnprocessableEntity, `"field":"limit"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/search"), `{"query":"x","colour":"red"}`)
	expect(t, "an unknown member", s, b, http.StatusBadRequest, `"field":"colour"`)
	s, b = call(t, "POST", p.url("/v1/clients/nobody/search"), `{"query":"x"}`)
	expect(t, "an unknown client", s, b, http.StatusNotFound, `"error"`)
	s, b = call(t, "POST", p.url("/v1/clients/shop/search"), `{"query":"x","min_version":{"pk":"1","version":99}}`)
	expect(t, "a version never written", s, b, http.StatusGatewayTimeout, `"field":"after"`)
}
