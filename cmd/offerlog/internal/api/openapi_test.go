package api_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/api"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/registry"
)

// TestOpenAPIDescribesEveryRoute: the description and the routes the
// server serves are the same set (answers are validated against it in
// internal/platform's TestAnswersFitTheOpenAPIDescription).
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %s, want 3.1", doc.OpenAPI)
	}
	// The description's version is the release's, which make
	// deploy-version writes here and in the manifests (it said 0.4.0 in
	// 0.5.0).
	kust, err := os.ReadFile("../../../../deploy/k8s/base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if tag := regexp.MustCompile(`(?m)^ *newTag: *(\S+)`).FindSubmatch(kust); tag == nil || doc.Info.Version != string(tag[1]) {
		t.Errorf("the OpenAPI description's version %s, the manifests' %s", doc.Info.Version, tag)
	}
	brokers := testkit.Broker(t, "").Addrs()
	srv, err := api.New(api.Config{Auth: auth.Off(testkit.Logger()), Producer: testkit.Client(t, brokers), Cluster: testkit.Cluster(t, brokers),
		Epochs: registry.NewCatalogue(registry.DefaultEpochGrace), Partitions: 1, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	// {version} in the mux is {version} in the description too; the mux's
	// "GET /x" serves HEAD as well, which the description leaves out.
	routes, ops := srv.Routes(), api.Operations(doc)
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			t.Errorf("route %s is not in openapi.yaml", r)
		}
	}
	for _, o := range ops {
		if !slices.Contains(routes, o) {
			t.Errorf("openapi.yaml describes %s, which is not served", o)
		}
	}
	if len(routes) < 30 || !strings.HasPrefix(routes[0], "DELETE ") {
		t.Fatalf("routes %v", routes)
	}
}
