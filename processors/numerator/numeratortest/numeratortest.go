// Package numeratortest holds the numerator's fixtures for tests of
// other packages: a numerator load by generation, its seal, the
// assignments it gave, and a numerator run never interrupted to compare
// with.
package numeratortest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// numeratorKey is the i-th offer a numerator load shows the numerator.
func numeratorKey(i int) sharding.Key {
	return sharding.Key{BusinessID: uint64(1 + i%7), OfferID: fmt.Sprintf("sku-%04d", i), ShopID: 10, WarehouseID: 1}
}

// NumeratorGeneration is what generation g of a numerator load shows the
// numerator: a window of 60 keys moving by 10 per generation, so keys come
// and go, then the generation's seal (the last record).
func NumeratorGeneration(g int64) []*kgo.Record {
	var recs []*kgo.Record
	for i := int(10 * g); i < int(10*g)+60; i++ {
		k := numeratorKey(i)
		data, _ := schemas.OffersSeen.Encode(&schemas.OfferSeen{BusinessID: int64(k.BusinessID), OfferID: k.OfferID,
			ShopID: int64(k.ShopID), WarehouseID: int64(k.WarehouseID), Generation: g})
		recs = append(recs, &kgo.Record{Topic: topics.NumeratorOffers, Key: []byte(k.String()), Value: data})
	}
	m, _ := schemas.GenerationMarkers.Encode(&schemas.GenerationMarker{Action: schemas.MarkerSeal, Generation: g, Scheme: -1})
	return append(recs, &kgo.Record{Topic: topics.NumeratorGenerations, Key: []byte("numerator"), Value: m})
}

// SendGeneration produces generation g's offers, then its seal.
func SendGeneration(ctx context.Context, cl *kgo.Client, g int64) error {
	recs := NumeratorGeneration(g)
	if err := cl.ProduceSync(ctx, recs[:len(recs)-1]...).FirstErr(); err != nil {
		return err
	}
	return cl.ProduceSync(ctx, recs[len(recs)-1]).FirstErr()
}

// SealedGeneration returns the newest generation of the numerator's states.
func SealedGeneration[K testkit.Kafka](ctx context.Context, brokers K) (int64, error) {
	var g int64
	err := testkit.WithCluster(brokers, func(c *streams.Cluster) error {
		return streams.ReadToEnd(ctx, c, topics.NumeratorStates, func(r *kgo.Record) {
			var st schemas.NumeratorState
			if schemas.NumeratorStates.Decode(r.Value, &st) == nil && st.Invalid == "" {
				g = max(g, st.Generation)
			}
		})
	})
	return g, err
}

// WaitSealed waits until generation g is sealed.
func WaitSealed[K testkit.Kafka](ctx context.Context, brokers K, g int64) error {
	for {
		got, err := SealedGeneration(ctx, brokers)
		if err == nil && got >= g {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("generation %d not sealed (last %d, %v): %w", g, got, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Placed is where the numerator put a key: its shard and doc_id.
type Placed struct {
	Shard int32
	DocID int64
}

// Assignments returns the numerator's last assignment of every key.
func Assignments[K testkit.Kafka](t testing.TB, brokers K) map[string]Placed {
	t.Helper()
	out := map[string]Placed{}
	for _, r := range testkit.ReadAll(t, brokers, topics.NumeratorAssignments) {
		var a schemas.Assignment
		if err := schemas.Assignments.Decode(r.Value, &a); err != nil {
			t.Fatal(err)
		}
		out[string(r.Key)] = Placed{a.Shard, a.DocID}
	}
	return out
}

// StraightNumerator runs a numerator never interrupted (cfg, with a local
// coordinator) over generations 1..last of a numerator load, on a broker
// of its own, and returns its assignments and its table once it applied
// them: what a numerator that was killed, paused or cut off must have
// given.
func StraightNumerator(t *testing.T, cfg numerator.Config, partitions int32, last int64, tableKeys int) (map[string]Placed, map[string][]byte) {
	t.Helper()
	brokers := testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(partitions))
	cfg.Streams = table.Config{Cluster: testkit.Cluster(t, brokers), StateDir: t.TempDir(), Replication: 1, Logger: testkit.Logger()}
	cfg.Coordinator, cfg.Logger = &coordinator.Local{}, testkit.Logger()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- numerator.Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	wctx := testkit.Context(t, 5*time.Minute)
	for g := int64(1); g <= last; g++ {
		if err := SendGeneration(wctx, cl, g); err != nil {
			t.Fatal(err)
		}
		if err := WaitSealed(wctx, brokers, g); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, time.Minute, "the straight numerator applied its results", func() bool {
		return len(testkit.Table(t, brokers, string(topics.NumeratorTable))) == tableKeys
	})
	return Assignments(t, brokers), testkit.Table(t, brokers, string(topics.NumeratorTable))
}
