package platform_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
)

// goInternals are words of Go's own error texts that no answer of offerlog
// should pass on to a client: they say where the code failed, not what
// the caller sent.
var goInternals = regexp.MustCompile(`bufio|runtime|json: |Go struct|Go value|unexpected EOF|strconv\.|\*[a-z]+\.[A-Z]`)

// TestErrorsSayWhy sends what a client gets wrong to a running platform,
// through its HTTP listener, and checks each answer names the cause and
// the part at fault with the right status, in words, not Go's.
func TestErrorsSayWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	r := platformtest.Start(t, platformtest.Config(t.TempDir()))
	base := "http://" + r.Info.HTTPAddr
	s, body := call(t, "PUT", base+"/v1/clients/shop/epochs/1", epochBody)
	expect(t, "register epoch", s, body, http.StatusCreated, `"epoch":1`)

	for _, c := range []struct {
		what, method, path, body string
		status                   int
		want                     string
	}{
		{"a pk over 1 KiB", "GET", "/v1/clients/shop/documents/" + strings.Repeat("k", 1025), "", 422, `"field":"pk"`},
		{"a pk not UTF-8", "GET", "/v1/clients/shop/documents/a%FFb", "", 422, `not valid UTF-8`},
		{"a pk with a control character", "GET", "/v1/clients/shop/documents/a%01b", "", 422, `control character`},
		{"an offer id over 1 KiB", "GET", "/v1/offers/" + strings.Repeat("1", 1025), "", 422, `"field":"id"`},
		{"an offer id with a control character", "GET", "/v1/offers/1%012", "", 422, `control character`},
		{"a well-formed id offerlog never gave", "GET", "/v1/offers/abc", "", 404, `"field":"id"`},
		{"a seller not UTF-8", "GET", "/v1/sellers/a%FFb/counters", "", 422, `"field":"seller_id"`},
		{"a member of the wrong type", "POST", "/v1/clients/shop/documents", `{"pk":5,"version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z"}`,
			400, `"field":"pk"`},
		{"a member the API does not take", "POST", "/v1/clients/shop/documents", `{"pk":"1","colour":"red"}`, 400, `"field":"colour"`},
		{"JSON cut short", "POST", "/v1/clients/shop/documents", `{"pk":"1",`, 400, `malformed JSON`},
		{"a timestamp that is not RFC 3339", "POST", "/v1/clients/shop/documents", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"yesterday"}`,
			422, `"field":"timestamp"`},
		{"a malformed client name", "GET", "/v1/clients/Bad!/epochs", "", 422, `"field":"client"`},
		{"a feed line of the wrong type", "POST", "/v1/sellers/s1/feeds/2", `{"external_id":7}` + "\n", 400, `external_id: want a string`},
		{"a feed line over the limit", "POST", "/v1/sellers/s1/feeds/1",
			`{"external_id":"e1","offer":{"title":"` + strings.Repeat("x", 3<<20) + `"}}` + "\n", 413, `"field":"line 1"`},
	} {
		s, body := call(t, c.method, base+c.path, c.body)
		expect(t, c.what, s, body, c.status, c.want)
		if goInternals.MatchString(body) {
			t.Errorf("%s: the answer passes on Go's own words: %s", c.what, body)
		}
	}
	s, body = call(t, "POST", base+"/v1/sellers/s1/feeds/1", `{"external_id":"e1","offer":{"title":"`+strings.Repeat("x", 3<<20)+`"}}`+"\n")
	expect(t, "the feed line's limit in its answer", s, body, 413, "2097152 bytes")
}
