package offerapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
)

func TestBrokerProcess(t *testing.T) { testkit.ServeBroker(t) }

// TestBrokerKilledUnderTheOfferStorage kills the broker (SIGKILL of its
// process) under a running offer storage and starts it again on its data:
// the components find it again by themselves, every write acknowledged
// before the kill is still there, and writes after it are answered and
// counted.
func TestBrokerKilledUnderTheOfferStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a broker process")
	}
	dir := t.TempDir()
	brokers, kill := testkit.BrokerProcess(t, dir, 0)
	n := start(t, brokers, t.TempDir())
	n.want(t, 202, "POST", "/v1/sellers/hana/feeds/1", feed(1, 10, "t1"), nil)
	n.want(t, 202, "POST", "/v1/sellers/hana/feeds/1/finish", "", nil)
	before := n.byExternal(t, "hana", "all", 10)

	kill()
	testkit.BrokerProcess(t, dir, 0)

	// Writes are answered again once the components have reconnected.
	id := before["vin-3"].Offer.ID
	body := `{"seller_id":"hana","expected_version":-1,"offer":{"category":"cars","title":"after","price":7,"currency":"RUB","status":"SOLD"}}`
	testkit.Eventually(t, 2*time.Minute, "a write answered after the broker's restart", func() bool {
		return n.do(t, "PUT", "/v1/offers/"+id, body, nil) == http.StatusOK
	})
	n.eventuallyCounters(t, "hana", 10, [5]int64{9, 0, 0, 1, 7})
	for ext, o := range n.byExternal(t, "hana", "all", 10) {
		if b := before[ext]; b == nil || (o.Offer.ID != b.Offer.ID) {
			t.Errorf("%s: %+v after the restart, %+v before", ext, o, b)
		}
	}
	testkit.Eventually(t, time.Minute, "ready again", func() bool {
		return n.do(t, "GET", "/readyz", "", nil) == http.StatusOK
	})
}
