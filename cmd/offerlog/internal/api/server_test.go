package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/api"
)

// TestNoRouteIsAJSONError: an unknown path is a JSON 404, a known path with
// another method a JSON 405 with Allow.
func TestNoRouteIsAJSONError(t *testing.T) {
	base := registryServer(t)
	var e api.Error
	if code, body := call(t, "GET", base+"/v1/nowhere", "", &e); code != 404 || !strings.Contains(e.Error, "no route") {
		t.Fatalf("unknown path: %d %s", code, body)
	}
	req, _ := http.NewRequest("DELETE", base+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") == "" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("wrong method: %d %v %+v %v", resp.StatusCode, resp.Header, e, err)
	}
}
