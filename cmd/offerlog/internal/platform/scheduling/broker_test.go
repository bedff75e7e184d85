package scheduling_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

func TestBrokerProcess(t *testing.T) { testkit.ServeBroker(t) }

// TestBrokerKilledUnderTheScheduler kills the broker (SIGKILL of its
// process) while the router, a stage's workers and the aggregate are busy,
// and starts it again on its data: every offer, those created before the
// kill and those after, gets the stage's result.
func TestBrokerKilledUnderTheScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a broker process")
	}
	dir := t.TempDir()
	brokers, kill := testkit.BrokerProcess(t, dir, 0)
	a := &attrStage{attr: "a", pause: 20 * time.Millisecond, perOffer: map[string]int{}}
	cfg := platformtest.Config(t.TempDir())
	cfg.Brokers = brokers
	cfg.Components = []string{platform.ComponentOffers, platform.ComponentScheduler}
	cfg.Stages = scheduler.Config{Stages: []scheduler.StageConfig{{Name: "stage-a", Address: serve(t, a), MaxParallelism: 4}}}
	platformtest.Start(t, cfg)

	var ids []string
	produce := func(from, to int) {
		prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
		for i := from; i < to; i++ {
			ids = append(ids, create(t, prod, "s", fmt.Sprint("offer ", i), time.Now()))
		}
	}
	produce(0, 20)
	kill()
	testkit.BrokerProcess(t, dir, 0)
	produce(20, 40)
	// Minutes at most: the whole suite shares 2 cores with it.
	testkit.Eventually(t, 5*time.Minute, "the stage's result on every offer", func() bool {
		done := map[string]bool{}
		for _, r := range testkit.ReadAll(t, brokers, topics.OffersTable) {
			var rec schemas.OfferRecord
			if schemas.OfferRecords.Decode(r.Value, &rec) == nil {
				done[string(r.Key)] = rec.Offer.Attributes.Get("a") == "done"
			}
		}
		for _, id := range ids {
			if !done[id] {
				return false
			}
		}
		return true
	})
}
