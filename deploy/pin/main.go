// Command pin pins the third-party images the deploy files name to the
// digests their registries give for their tags today (make pin-images):
// every `image: NAME:TAG` of the manifests and compose and every `FROM
// NAME:TAG` of the Dockerfile becomes `NAME:TAG@sha256:...`, so that what
// ships runs the bytes that were tested, whatever the tag is moved to
// later. Run it again to move the pins to the tags' current digests; the
// offerlog image itself is left alone (its version is the release's).
//
//	go run ./deploy/pin [--registry HOST=URL]... FILE...
//
// A digest is read as Docker does: HEAD /v2/NAME/manifests/TAG with the
// manifest list and OCI index media types, and, when the registry asks for
// it (401, WWW-Authenticate: Bearer), an anonymous token from its realm.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pin:", err)
		os.Exit(1)
	}
}

// registries maps a registry host to the URL it is asked at (tests).
type registries map[string]string

func (r registries) String() string { return fmt.Sprint(map[string]string(r)) }

func (r registries) Set(s string) error {
	host, u, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want HOST=URL, not %q", s)
	}
	r[host] = u
	return nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("pin", flag.ContinueOnError)
	regs := registries{}
	fs.Var(regs, "registry", "ask registry HOST at URL instead (HOST=URL; repeat)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("which files?")
	}
	r := &resolver{client: &http.Client{Timeout: 30 * time.Second}, regs: regs, digests: map[string]string{}}
	for _, file := range fs.Args() {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		out, n, err := r.pinAll(ctx, string(b))
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if out != string(b) {
			if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "%s: %d images pinned\n", file, n)
	}
	return nil
}

// imageRef is an image reference of a deploy file: `image: REF` or
// `FROM REF`, REF NAME:TAG with an optional @sha256:DIGEST.
var imageRef = regexp.MustCompile(`(?m)^(\s*(?:-\s+)?image:\s+|FROM\s+)([a-z0-9][a-z0-9._/-]*):([A-Za-z0-9._-]+)(@sha256:[0-9a-f]{64})?`)

// pinAll pins every third-party image of text and returns the new text
// and how many references it pinned.
func (r *resolver) pinAll(ctx context.Context, text string) (string, int, error) {
	var firstErr error
	n := 0
	out := imageRef.ReplaceAllStringFunc(text, func(m string) string {
		g := imageRef.FindStringSubmatch(m)
		prefix, name, tag := g[1], g[2], g[3]
		if name == "offerlog" || firstErr != nil {
			return m
		}
		digest, err := r.digest(ctx, name, tag)
		if err != nil {
			firstErr = fmt.Errorf("%s:%s: %w", name, tag, err)
			return m
		}
		n++
		return prefix + name + ":" + tag + "@" + digest
	})
	return out, n, firstErr
}

// resolver reads digests from registries, each tag once.
type resolver struct {
	client  *http.Client
	regs    registries
	digests map[string]string
}

// digest returns the digest the registry gives name:tag.
func (r *resolver) digest(ctx context.Context, name, tag string) (string, error) {
	if d, ok := r.digests[name+":"+tag]; ok {
		return d, nil
	}
	host, repo := splitName(name)
	base := "https://" + host
	if u, ok := r.regs[host]; ok {
		base = u
	}
	manifest := base + "/v2/" + repo + "/manifests/" + tag
	resp, err := r.head(ctx, manifest, "")
	if err != nil {
		return "", err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		token, err := r.token(ctx, resp.Header.Get("WWW-Authenticate"), repo)
		if err != nil {
			return "", err
		}
		if resp, err = r.head(ctx, manifest, token); err != nil {
			return "", err
		}
	}
	d := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(d, "sha256:") {
		return "", fmt.Errorf("%s: %s, digest %q", manifest, resp.Status, d)
	}
	r.digests[name+":"+tag] = d
	return d, nil
}

func (r *resolver) head(ctx context.Context, u, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return nil, err
	}
	// A multi-platform image's digest is its index's: the one docker pull
	// NAME@DIGEST resolves on every platform.
	req.Header.Set("Accept", strings.Join([]string{"application/vnd.oci.image.index.v1+json",
		"application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.oci.image.manifest.v1+json",
		"application/vnd.docker.distribution.manifest.v2+json"}, ", "))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp, nil
}

// token gets an anonymous pull token from the realm a 401's challenge
// names (Bearer realm="...",service="...").
func (r *resolver) token(ctx context.Context, challenge, repo string) (string, error) {
	params := map[string]string{}
	rest, ok := strings.CutPrefix(challenge, "Bearer ")
	if !ok {
		return "", fmt.Errorf("the registry asks for %q, not a bearer token", challenge)
	}
	for _, kv := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(rest, -1) {
		params[kv[1]] = kv[2]
	}
	if params["realm"] == "" {
		return "", fmt.Errorf("no realm in %q", challenge)
	}
	q := url.Values{"scope": {"repository:" + repo + ":pull"}}
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, params["realm"]+"?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token: %s", resp.Status)
	}
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	if t.Token == "" && t.AccessToken == "" {
		return "", errors.New("token: none in the answer")
	}
	return cmp.Or(t.Token, t.AccessToken), nil
}

// splitName returns the registry host and the repository of an image
// name, as Docker reads it: a first part with a dot or a colon, or
// localhost, is a host; else Docker Hub, official images under library/.
func splitName(name string) (host, repo string) {
	first, rest, ok := strings.Cut(name, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first, rest
	}
	if !ok {
		return "registry-1.docker.io", "library/" + name
	}
	return "registry-1.docker.io", name
}
