package testkit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

// RegisterEpoch appends epoch 1 of client (one required string field,
// "title"), registered a minute ago, to the epochs topic.
func RegisterEpoch[K Kafka](t testing.TB, brokers K, client string) {
	t.Helper()
	data, err := schemas.EpochSchemas.Encode(&schemas.EpochSchema{Client: client, Epoch: 1,
		RegisteredAt: time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond),
		Fields:       []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString, Required: true}},
		Embeddings:   []schemas.EmbeddingSpec{}})
	if err != nil {
		t.Fatal(err)
	}
	cl := Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	rec := &kgo.Record{Topic: topics.Epochs, Key: []byte(client + "/1"), Value: data}
	if err := cl.ProduceSync(Context(t, time.Minute), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// ProduceDocs appends docs to documents.ingest for client, acks=all.
func ProduceDocs[K Kafka](t testing.TB, brokers K, client string, docs []*schemas.RawDocument) {
	t.Helper()
	cl := Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	recs := make([]*kgo.Record, 0, len(docs))
	for _, d := range docs {
		data, err := schemas.RawDocuments.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte(client + "/" + d.PK), Value: data})
	}
	if err := cl.ProduceSync(Context(t, 2*time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// ShuffledVersions returns keys x versions documents of the epoch
// RegisterEpoch registers, in an order shuffled by seed. Version v of a key
// is fresher than v-1.
func ShuffledVersions(keys, versions int, seed uint64) []*schemas.RawDocument {
	base := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	var docs []*schemas.RawDocument
	for k := range keys {
		for v := 1; v <= versions; v++ {
			title := fmt.Sprintf("doc %d v%d", k, v)
			docs = append(docs, &schemas.RawDocument{PK: fmt.Sprint(k), Version: int64(v), Epoch: 1,
				Action: schemas.ActionUpsert, Timestamp: base.Add(time.Duration(v) * time.Millisecond),
				Fields: []schemas.Field{{Name: "title", String: &title}}, Embeddings: []schemas.Embedding{}})
		}
	}
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	return docs
}

// Table reads a compacted table topic (a topics.Table or any name) into
// key -> last value.
func Table[K Kafka, T ~string](t testing.TB, brokers K, topic T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, r := range ReadAll(t, brokers, topic) {
		if r.Value == nil {
			delete(out, string(r.Key))
			continue
		}
		out[string(r.Key)] = r.Value
	}
	return out
}

// LastSaas reads client's search feed into key -> its last record.
func LastSaas[K Kafka](t testing.TB, brokers K, client string) map[string]schemas.SaasDocument {
	t.Helper()
	out := map[string]schemas.SaasDocument{}
	for _, r := range ReadAll(t, brokers, topics.SaasTopic(client)) {
		var d schemas.SaasDocument
		if err := schemas.SaasDocuments.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		out[string(r.Key)] = d
	}
	return out
}
