package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealthAsksTheProcess runs offerlog health, the image's HEALTHCHECK,
// against a real socket: exit 0 for a ready process, 1 for one that is not
// (saying its answer) or none at all; the address from OFFERLOG_HTTP, as a
// container's process reads it, a wildcard host asked on loopback.
func TestHealthAsksTheProcess(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready {
			http.Error(w, "view offers-table behind", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	port := srv.Listener.Addr().String()[strings.LastIndexByte(srv.Listener.Addr().String(), ':'):]
	health := func(want int, wantOut string) {
		t.Helper()
		var out, errb strings.Builder
		if code := run(context.Background(), []string{"health"}, nil, &out, &errb); code != want ||
			!strings.Contains(out.String()+errb.String(), wantOut) {
			t.Errorf("health: exit %d, want %d; %s%s (want %q)", code, want, out.String(), errb.String(), wantOut)
		}
	}
	t.Setenv("OFFERLOG_HTTP", port) // ":PORT", as compose's settings write it
	health(0, "ready: http://127.0.0.1"+port+"/readyz")
	ready = false
	health(1, "503 Service Unavailable: view offers-table behind")
	srv.Close()
	health(1, "not ready")
}
