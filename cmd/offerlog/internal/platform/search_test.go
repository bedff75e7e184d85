package platform_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas/proto/searchv1"
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

	// A client whose epoch names analyzers: its words are found by stem.
	s, b = call(t, "PUT", p.url("/v1/clients/lang/epochs/1"),
		`{"analyzer":"russian","fields":[{"name":"title","type":"string"},{"name":"en","type":"string","analyzer":"english"}]}`)
	expect(t, "register an epoch with analyzers", s, b, http.StatusCreated, `"analyzer":"russian"`)
	s, b = call(t, "POST", p.url("/v1/clients/lang/documents?wait=true"),
		fmt.Sprintf(`{"pk":"r","version":1,"epoch":1,"action":"UPSERT","timestamp":%q,"fields":{"title":"Детские велосипеды","en":"Red bicycles"}}`, docTime))
	expect(t, "post r", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	s, b = call(t, "POST", p.url("/v1/clients/lang/search"), `{"query":"велосипед","min_version":{"pk":"r","version":1}}`)
	expect(t, "a Russian stem", s, b, http.StatusOK, `"pk":"r"`)
	s, b = call(t, "GET", p.url("/v1/clients/lang/search?q=bicycle"), "")
	expect(t, "an English stem", s, b, http.StatusOK, `"pk":"r"`)

	// The same over gRPC, in protobuf's well-known JSON form.
	conn, err := grpc.NewClient(p.info.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	searcher := searchv1.NewSearchServiceClient(conn)
	gte := 400.0
	out, err := searcher.Search(t.Context(), &searchv1.SearchRequest{Client: "shop", Query: &searchv1.Query{Query: "bicycle",
		Filters: []*searchv1.Filter{{Field: "price", Gte: &gte}, {Field: "tags", Eq: structpb.NewStringValue("t")}},
		Sort:    []*searchv1.Sort{{Field: "price", Order: "desc"}}}})
	if err != nil || len(out.GetHits()) != 1 || out.Hits[0].Pk != "2" || out.Hits[0].Fields.AsMap()["title"] != "blue bicycle" || out.Total != 1 {
		t.Errorf("SearchService.Search: %v %v", out, err)
	}
	knn, err := searcher.Search(t.Context(), &searchv1.SearchRequest{Client: "shop", Query: &searchv1.Query{
		Knn: &searchv1.KNN{Field: "vec", Vector: []float32{1, 0}, K: 1}}})
	if err != nil || len(knn.GetHits()) != 1 || knn.Hits[0].Pk != "1" {
		t.Errorf("SearchService.Search of a vector: %v %v", knn, err)
	}
	if _, err := searcher.Search(t.Context(), &searchv1.SearchRequest{Client: "shop", Query: &searchv1.Query{Query: "x", Limit: 5000}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit") {
		t.Errorf("SearchService.Search of a bad query: %v", err)
	}
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

// TestSearchFansOutToTheSearcherMembers runs the production form: the API
// in a process of its own, two searcher members sharing the feed's
// partitions, each found by the API through the searcher's group. A search
// asks both and merges them, pages included; with one member stopped the
// answer names its partitions missing, never hangs, and once the other
// took them over and caught up on its own copy, the answer is whole again.
func TestSearchFansOutToTheSearcherMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	base := func(components ...string) platform.Config {
		cfg := platformtest.Config(t.TempDir())
		cfg.Brokers, cfg.Components, cfg.GRPCAddr = b.Addrs(), components, ""
		return cfg
	}
	api := base(platform.ComponentRegistry, platform.ComponentIndexer, platform.ComponentAPI)
	running := platformtest.Start(t, api)
	url := func(path string) string { return "http://" + running.Info.HTTPAddr + path }
	s, body := call(t, "PUT", url("/v1/clients/shop/epochs/1"), epochBody)
	expect(t, "register epoch", s, body, http.StatusCreated, `"epoch":1`)
	var members []*platformtest.Running
	for range 2 {
		cfg := base(search.Spec.Name)
		cfg.HTTPAddr = freeAddr(t)
		cfg.SearchAdvertise = "http://" + cfg.HTTPAddr
		members = append(members, platformtest.Start(t, cfg))
	}
	const docs = 40
	for i := range docs {
		body := fmt.Sprintf(`{"pk":"%d","version":1,"epoch":1,"action":"UPSERT","timestamp":%q,"fields":{"title":"lamp %d","price":%d,"tags":["t"]},"embeddings":{"vec":[1,%d]}}`,
			i, docTime, i, 10*i, i)
		s, b := call(t, "POST", url("/v1/clients/shop/documents?wait=true"), body)
		expect(t, "post", s, b, http.StatusOK, `"verdict":"ACCEPTED"`)
	}
	all := func() (pks []string, partial bool) {
		q := `{"query":"lamp","sort":[{"field":"price"}],"limit":7}`
		for {
			s, b := call(t, "POST", url("/v1/clients/shop/search"), q)
			if s != http.StatusOK {
				t.Fatalf("search: %d %s", s, b)
			}
			var r search.Result
			if err := json.Unmarshal([]byte(b), &r); err != nil {
				t.Fatal(err)
			}
			for _, h := range r.Hits {
				pks = append(pks, h.PK)
			}
			partial = partial || r.Partial
			if r.Cursor == "" {
				return pks, partial
			}
			q = fmt.Sprintf(`{"query":"lamp","sort":[{"field":"price"}],"limit":7,"cursor":%q}`, r.Cursor)
		}
	}
	inOrder := func(pks []string) bool {
		if len(pks) != docs {
			return false
		}
		for i, pk := range pks {
			if pk != fmt.Sprint(i) {
				return false
			}
		}
		return true
	}
	// Both members hold some of the feed's partitions once each has seen
	// the feed (a member joins before its metadata names the topic).
	testkit.Eventually(t, 2*time.Minute, "the partitions shared by both members", func() bool {
		for _, m := range members {
			s, b := call(t, "POST", "http://"+m.Info.HTTPAddr+"/v1/clients/shop/search", `{"query":"lamp","with_sort":true,"limit":1}`)
			var r search.Result
			if s != http.StatusOK || json.Unmarshal([]byte(b), &r) != nil || len(r.Held) == 0 || len(r.Held) == 4 {
				return false
			}
		}
		return true
	})
	testkit.Eventually(t, 2*time.Minute, "every document found through both members, in order, by pages", func() bool {
		pks, partial := all()
		return !partial && inOrder(pks)
	})
	s, body = call(t, "POST", url("/v1/clients/shop/search"), `{"knn":{"field":"vec","vector":[1,39],"k":3}}`)
	expect(t, "a kNN over both members", s, body, http.StatusOK, `"pk":"39"`)

	if err := members[1].Stop(); err != nil {
		t.Fatal(err)
	}
	sawPartial := false
	testkit.Eventually(t, 2*time.Minute, "the remaining member answers for every partition", func() bool {
		pks, partial := all()
		sawPartial = sawPartial || partial
		return !partial && inOrder(pks)
	})
	t.Logf("a partial answer seen while the partitions moved: %v", sawPartial)
}
