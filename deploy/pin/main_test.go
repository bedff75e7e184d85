package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinsThirdPartyImages runs pin against a registry on a real socket
// that answers as Docker Hub does (401 with a bearer challenge, an
// anonymous token from its realm, the digest in Docker-Content-Digest):
// every third-party image of a manifest, a compose file and a Dockerfile
// is pinned, offerlog's is not, and a second run moves the pins to the
// tags' new digests.
func TestPinsThirdPartyImages(t *testing.T) {
	digests := map[string]string{
		"/v2/library/zookeeper/manifests/3.8":              "sha256:" + strings.Repeat("a", 64),
		"/v2/apache/kafka/manifests/3.9.0":                 "sha256:" + strings.Repeat("b", 64),
		"/v2/library/golang/manifests/1.26-bookworm":       "sha256:" + strings.Repeat("c", 64),
		"/v2/distroless/static-debian12/manifests/nonroot": "sha256:" + strings.Repeat("d", 64),
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/token":
			if r.URL.Query().Get("scope") == "" {
				http.Error(w, "no scope", http.StatusBadRequest)
				return
			}
			w.Write([]byte(`{"token":"t0k"}`))
		case r.Method == http.MethodHead && r.Header.Get("Authorization") != "Bearer t0k" && strings.Contains(r.URL.Path, "library"):
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+srv.URL+`/token",service="registry.docker.io"`)
			w.WriteHeader(http.StatusUnauthorized)
		case r.Method == http.MethodHead && strings.Contains(r.Header.Get("Accept"), "image.index"):
			d, ok := digests[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Docker-Content-Digest", d)
		default:
			http.Error(w, "want HEAD of a manifest", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	files := map[string]string{
		"k8s.yaml":     "      containers:\n      - name: zk\n        image: zookeeper:3.8\n      - name: app\n        image: offerlog\n        image: offerlog:0.5.0\n",
		"compose.yaml": "  kafka-1:\n    image: apache/kafka:3.9.0\n",
		"Dockerfile":   "FROM golang:1.26-bookworm AS build\nRUN true\nFROM gcr.io/distroless/static-debian12:nonroot\n",
	}
	var paths []string
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	regs := []string{"--registry", "registry-1.docker.io=" + srv.URL, "--registry", "gcr.io=" + srv.URL}
	var out strings.Builder
	if err := run(context.Background(), append(regs, paths...), &out); err != nil {
		t.Fatalf("pin: %v", err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, want := range map[string][]string{
		"k8s.yaml":     {"image: zookeeper:3.8@" + digests["/v2/library/zookeeper/manifests/3.8"], "image: offerlog\n", "image: offerlog:0.5.0\n"},
		"compose.yaml": {"image: apache/kafka:3.9.0@" + digests["/v2/apache/kafka/manifests/3.9.0"]},
		"Dockerfile": {"FROM golang:1.26-bookworm@" + digests["/v2/library/golang/manifests/1.26-bookworm"] + " AS build",
			"FROM gcr.io/distroless/static-debian12:nonroot@" + digests["/v2/distroless/static-debian12/manifests/nonroot"]},
	} {
		for _, w := range want {
			if !strings.Contains(read(name), w) {
				t.Errorf("%s lacks %q:\n%s", name, w, read(name))
			}
		}
	}
	// The tag moved: a second run moves the pin.
	digests["/v2/library/zookeeper/manifests/3.8"] = "sha256:" + strings.Repeat("e", 64)
	if err := run(context.Background(), append(regs, paths...), &out); err != nil {
		t.Fatal(err)
	}
	if got := read("k8s.yaml"); !strings.Contains(got, "image: zookeeper:3.8@sha256:"+strings.Repeat("e", 64)+"\n") || strings.Contains(got, "aaaa") {
		t.Errorf("the second run did not move the pin:\n%s", got)
	}
	// A tag the registry does not know is an error, and changes nothing.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("image: zookeeper:9.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), append(regs, bad), &out); err == nil || read("bad.yaml") != "image: zookeeper:9.9\n" {
		t.Errorf("an unknown tag: %v\n%s", err, read("bad.yaml"))
	}
}

func TestSplitName(t *testing.T) {
	for name, want := range map[string][2]string{
		"zookeeper":                         {"registry-1.docker.io", "library/zookeeper"},
		"apache/kafka":                      {"registry-1.docker.io", "apache/kafka"},
		"gcr.io/distroless/static-debian12": {"gcr.io", "distroless/static-debian12"},
		"localhost/x":                       {"localhost", "x"},
		"registry:5000/team/app":            {"registry:5000", "team/app"},
	} {
		if h, r := splitName(name); h != want[0] || r != want[1] {
			t.Errorf("splitName(%q) = %s %s, want %v", name, h, r, want)
		}
	}
}
