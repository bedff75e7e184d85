package platform_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/topics"
)

func TestBrokerProcess(t *testing.T) { testkit.ServeBroker(t) }

// TestBrokerKilledUnderThePipeline kills the broker (SIGKILL of its
// process) under a running registry, indexer, API and cache, and starts it
// again on its data: the components find it again by themselves, every
// document accepted before the kill reaches the search feed, and documents
// posted after it are accepted too.
func TestBrokerKilledUnderThePipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a broker process")
	}
	dir := t.TempDir()
	brokers, kill := testkit.BrokerProcess(t, dir, 0)
	cfg := platformtest.Config(t.TempDir())
	cfg.Brokers = brokers
	cfg.Components = []string{platform.ComponentRegistry, platform.ComponentIndexer, platform.ComponentAPI, platform.ComponentCache}
	cfg.Cache.Table = string(topics.RegistryTable)
	cfg.EpochGrace = time.Second
	p := &running{Running: platformtest.Start(t, cfg)}
	p.info = p.Running.Info

	s, b := call(t, "PUT", p.url("/v1/clients/shop/epochs/1"), epochBody)
	expect(t, "register epoch", s, b, http.StatusCreated, `"epoch":1`)
	post := func(pk string) {
		t.Helper()
		testkit.Eventually(t, 2*time.Minute, "document "+pk+" accepted", func() bool {
			s, b := call(t, "POST", p.url("/v1/clients/shop/documents?wait=true"), docBody(pk, 1, ""))
			// A post answered late may have been accepted already: then it
			// is a duplicate.
			return s == http.StatusOK && (strings.Contains(b, `"verdict":"ACCEPTED"`) || strings.Contains(b, "duplicate"))
		})
	}
	for i := range 20 {
		post(fmt.Sprint(i))
	}
	kill()
	testkit.BrokerProcess(t, dir, 0)
	for i := 20; i < 40; i++ {
		post(fmt.Sprint(i))
	}
	testkit.Eventually(t, 2*time.Minute, "every document in the search feed", func() bool {
		return len(testkit.LastSaas(t, brokers, "shop")) == 40
	})
	testkit.Eventually(t, time.Minute, "ready again", func() bool {
		s, _ := call(t, "GET", p.url("/readyz"), "")
		return s == http.StatusOK
	})
}
