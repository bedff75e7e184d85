package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/api"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/registry"
)

// BenchmarkHealthz is the server's own cost of a request, before any
// offer logic: routing, auth, metrics, the JSON answer (go test -bench
// Healthz -benchmem; compare BenchmarkTrivial).
func BenchmarkHealthz(b *testing.B) {
	brokers := testkit.Broker(b, "").Addrs()
	srv, err := api.New(api.Config{Auth: auth.Off(testkit.Logger()), Producer: testkit.Client(b, brokers), Cluster: testkit.Cluster(b, brokers),
		Epochs: registry.NewCatalogue(registry.DefaultEpochGrace), Partitions: 1, Logger: testkit.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	serve(b, srv)
}

// BenchmarkTrivial is a handler that writes a small JSON body: the floor.
func BenchmarkTrivial(b *testing.B) {
	serve(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	}))
}

func serve(b *testing.B, h http.Handler) {
	req := httptest.NewRequest("GET", "/healthz", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
