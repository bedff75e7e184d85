package platform_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// browser starts Debian's chromium headless (as make test installs it) and
// returns a browser context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := testkit.Tool(t, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		// The machine's network is closed: without these Chromium keeps
		// calling Google's hosts.
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(testkit.Context(t, 3*time.Minute), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// into runs a and keeps its value in v.
func into[T any](v *T, a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		r, err := a(ctx, t)
		*v = r
		return chromedp.Void{}, err
	}
}

func TestConsoleInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	s := startSecured(t)
	base := "http://" + s.Info.HTTPAddr
	seller, _ := s.token(auth.Seller, "s1")

	// A poison command becomes a dead letter the console can re-drive.
	poison := offers.IDFrom(77)
	if err := s.prod.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.OffersCommands, Key: []byte(poison), Value: []byte("junk")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the poison command's dead letter", func() bool {
		return len(testkit.ReadAll(t, s.kafka, topics.OffersDead)) > 0
	})

	// A document the search page finds.
	if code, b := s.call("PUT", "/v1/clients/shop/epochs/1", `{"fields":[{"name":"title","type":"string"}]}`, s.admin); code != http.StatusCreated {
		t.Fatalf("epoch: %d %s", code, b)
	}
	doc := `{"pk":"k1","epoch":1,"version":1,"action":"UPSERT","timestamp":"2026-11-24T10:00:00Z","fields":{"title":"green lantern"}}`
	if code, b := s.call("POST", "/v1/clients/shop/documents?wait=true", doc, s.admin); code != http.StatusOK {
		t.Fatalf("document: %d %s", code, b)
	}
	s.eventually(http.StatusOK, "POST", "/v1/clients/shop/search", `{"query":"lantern","min_version":{"pk":"k1","version":1}}`, s.admin)

	ctx := browser(t)
	var location, groups, topicsText, stages, generations, letters, message, refused, hits string
	err := chromedp.Do(ctx,
		// Without a token the console asks for one.
		chromedp.Navigate(base+"/console"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		into(&location, chromedp.Location()),
		chromedp.SendKeys(chromedp.CSS("#token"), s.admin),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#groups")),
		into(&groups, chromedp.Text(chromedp.CSS("#groups"))),
		chromedp.Navigate(base+"/console/topics"),
		into(&topicsText, chromedp.Text(chromedp.CSS("#topics"))),
		chromedp.Navigate(base+"/console/scheduler"),
		into(&stages, chromedp.Text(chromedp.CSS("#stages"))),
		chromedp.Navigate(base+"/console/numerator"),
		into(&generations, chromedp.Text(chromedp.CSS("#generations"))),
		chromedp.Navigate(base+"/console/dead?topic="+topics.OffersDead),
		into(&letters, chromedp.Text(chromedp.CSS("#letters"))),
		chromedp.Click(chromedp.CSS("button.redrive")),
		chromedp.WaitVisible(chromedp.CSS("#message")),
		into(&message, chromedp.Text(chromedp.CSS("#message"))),
		// A search box per client: the client chosen, words typed.
		chromedp.Navigate(base+"/console/search"),
		chromedp.WaitVisible(chromedp.CSS("#q")),
		chromedp.SetValue(chromedp.CSS("#client"), "shop"),
		chromedp.SendKeys(chromedp.CSS("#q"), "lantern"),
		chromedp.Click(chromedp.CSS("#searchbutton")),
		chromedp.WaitVisible(chromedp.CSS("#hits")),
		into(&hits, chromedp.Text(chromedp.CSS("#hits"))),
		// Signed out, a seller's token is refused: the console is admins'.
		chromedp.Click(chromedp.CSS("header form button")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), seller),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#error")),
		into(&refused, chromedp.Text(chromedp.CSS("#error"))),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, text, want string }{
		{"the sign-in page", location, "/console/login"},
		{"the groups", groups, "offers"},
		{"the topics", topicsText, string(topics.FeedsStatus)},
		{"the scheduler", stages, "expiry"},
		{"the numerator's generations", generations, "none"},
		{"the dead letters", letters, "undecodable"},
		{"the re-drive", message, "re-driven: offers.dead"},
		{"a seller's sign-in", refused, "admin"},
		{"the search", hits, "green lantern"},
	} {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("%s: %q lacks %q", c.what, c.text, c.want)
		}
	}
	// The re-driven record is back on its topic, marked.
	testkit.Eventually(t, 30*time.Second, "the re-driven command on offers.commands", func() bool {
		for _, r := range testkit.ReadAll(t, s.kafka, topics.OffersCommands) {
			for _, h := range r.Headers {
				if h.Key == streams.RedrivenHeader && string(r.Key) == poison {
					return true
				}
			}
		}
		return false
	})

	// Every page reads without JavaScript: none has a script, and the
	// policy forbids them.
	for _, page := range []string{"", "/topics", "/groups", "/tables", "/scheduler", "/numerator", "/dead?topic=offers.dead", "/search?client=shop&q=lantern"} {
		req, _ := http.NewRequest("GET", base+"/console"+page, nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(body), "<script") || strings.Contains(string(body), `class="err"`) ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("/console%s: %d, a script, an error or no policy:\n%.2000s", page, resp.StatusCode, body)
		}
	}
	// A cross-site form is refused.
	req, _ := http.NewRequest("POST", base+"/console/dead/redrive", strings.NewReader("topic=offers.dead&partition=0&offset=0"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+s.admin)
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a cross-site re-drive: %v %v, want 400", resp, err)
	}
	// So is one a browser marks cross-site without an Origin.
	req, _ = http.NewRequest("POST", base+"/console/logout", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site sign-out: %v %v, want 403", resp, err)
	}
	// The session cookie is Secure whenever the browser came over HTTPS:
	// behind the shipped TLS-terminating Ingress too.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for proto, secure := range map[string]bool{"": false, "https": true} {
		req, _ := http.NewRequest("POST", base+"/console/login", strings.NewReader("token="+s.admin))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookie := resp.Header.Get("Set-Cookie")
		if resp.StatusCode != http.StatusSeeOther || strings.Contains(cookie, "; Secure") != secure {
			t.Errorf("sign-in with X-Forwarded-Proto %q: %d, cookie %q, want Secure %v", proto, resp.StatusCode, cookie, secure)
		}
	}
}
