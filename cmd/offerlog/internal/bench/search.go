package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/topics"
)

// searchDims is the bench documents' embedding's dimensions.
const searchDims = 32

// searchWords is the vocabulary of the bench documents' titles.
var searchWords = func() []string {
	out := make([]string, 1000)
	for i := range out {
		out[i] = fmt.Sprintf("w%03d", i)
	}
	return out
}()

// searchDoc is the bench's i-th document: a title of three words, a price,
// two tags and a 32-dimension embedding.
func searchDoc(rng *rand.Rand, i int, version int64) *schemas.SaasDocument {
	title := strings.Join([]string{searchWords[rng.IntN(len(searchWords))], searchWords[rng.IntN(len(searchWords))],
		searchWords[rng.IntN(len(searchWords))]}, " ")
	price := int64(rng.IntN(10_000))
	vec := make([]float32, searchDims)
	for j := range vec {
		vec[j] = rng.Float32()*2 - 1
	}
	return &schemas.SaasDocument{PK: fmt.Sprint(i), Action: schemas.ActionUpsert, Epoch: 1, Version: version,
		Timestamp: time.Now().UTC().Truncate(time.Millisecond),
		Fields: []schemas.Field{{Name: "title", String: &title}, {Name: "price", Int64: &price},
			{Name: "tags", StringList: []string{searchWords[i%7], searchWords[i%11]}}},
		Embeddings: []schemas.Embedding{{Name: "vec", Vector: vec}}}
}

// runSearch measures the searcher: indexing env.Docs documents of a feed
// against raw Bleve indexing the same documents in the same run (the
// ceiling), then queries of each kind (words, a filter, a kNN) while the
// feed grows, and how long a document takes to be found after its write.
func runSearch(ctx context.Context, env *Env) (Result, error) {
	const client = "bench"
	n := env.Docs
	if _, err := topics.Ensure(ctx, env.Admin, -1, topics.ForClient(client, env.Partitions)); err != nil {
		return Result{}, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(20261129, 2))
	docs := make([]*schemas.SaasDocument, n)
	for i := range docs {
		docs[i] = searchDoc(rng, i, 1)
		data, err := schemas.SaasDocuments.Encode(docs[i])
		if err != nil {
			return Result{}, err
		}
		cl.Produce(ctx, &kgo.Record{Topic: topics.SaasTopic(client), Key: []byte(client + "/" + docs[i].PK), Value: data}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		return Result{}, err
	}

	// The ceiling: raw Bleve indexing the same documents, a batch of
	// 1 000 at a time, into one index per partition as the searcher keeps.
	rawStart := time.Now()
	raws := make([]bleve.Index, env.Partitions)
	for p := range raws {
		if raws[p], err = bleve.New(filepath.Join(env.StateDir, "raw", fmt.Sprint(p)), bleve.NewIndexMapping()); err != nil {
			return Result{}, err
		}
	}
	batches := make([]*bleve.Batch, env.Partitions)
	for p := range batches {
		batches[p] = raws[p].NewBatch()
	}
	for i, d := range docs {
		p := i % int(env.Partitions)
		doc := map[string]any{}
		for _, f := range d.Fields {
			switch {
			case f.String != nil:
				doc[f.Name] = *f.String
			case f.Int64 != nil:
				doc[f.Name] = float64(*f.Int64)
			default:
				doc[f.Name] = f.StringList
			}
		}
		raw, _ := json.Marshal(d)
		doc["_doc"] = string(raw)
		if err := batches[p].Index(d.PK, doc); err != nil {
			return Result{}, err
		}
		if batches[p].Size() >= 1000 {
			if err := raws[p].Batch(batches[p]); err != nil {
				return Result{}, err
			}
			batches[p] = raws[p].NewBatch()
		}
	}
	for p := range batches {
		if err := raws[p].Batch(batches[p]); err != nil {
			return Result{}, err
		}
		raws[p].Close()
	}
	rawDur := time.Since(rawStart)

	// The searcher, on the feed.
	epochs := registry.NewCatalogue(0)
	epochs.Put(&schemas.EpochSchema{Client: client, Epoch: 1, RegisteredAt: time.Now().Add(-time.Hour),
		Fields: []schemas.FieldSpec{{Name: "title", Type: schemas.TypeString, Required: true}, {Name: "price", Type: schemas.TypeInt64},
			{Name: "tags", Type: schemas.TypeStringList}},
		Embeddings: []schemas.EmbeddingSpec{{Name: "vec", Dimension: searchDims}}})
	s := search.New(search.Config{Cluster: env.Cluster, Dir: filepath.Join(env.StateDir, "searcher"), Epochs: epochs, Logger: env.Logger})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.Run(sctx) }()
	defer func() {
		cancel()
		<-done
	}()
	ends, err := env.Admin.ListEndOffsets(ctx, topics.SaasTopic(client))
	if err != nil {
		return Result{}, err
	}
	for {
		behind := false
		ends.Each(func(o kadm.ListedOffset) { behind = behind || s.Applied(client, o.Partition) < o.Offset })
		if !behind {
			break
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case err := <-done:
			return Result{}, fmt.Errorf("the searcher stopped: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	indexDur := time.Since(start)

	// Queries of each kind while the feed grows by new versions, and how
	// long a write takes to be found (min_version of its pk).
	writes, writesDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(writesDone)
		wrng := rand.New(rand.NewPCG(20261129, 3))
		for i := 0; ; i++ {
			select {
			case <-writes:
				return
			default:
			}
			d := searchDoc(wrng, wrng.IntN(n), int64(2+i))
			data, _ := schemas.SaasDocuments.Encode(d)
			cl.Produce(ctx, &kgo.Record{Topic: topics.SaasTopic(client), Key: []byte(client + "/" + d.PK), Value: data}, nil)
			time.Sleep(time.Millisecond) // about 1 000 documents/s beside the queries
		}
	}()
	queries := []struct {
		name string
		q    func(r *rand.Rand) search.Query
	}{
		{"word query", func(r *rand.Rand) search.Query {
			return search.Query{Query: searchWords[r.IntN(len(searchWords))], Limit: 20}
		}},
		{"filter query", func(r *rand.Rand) search.Query {
			lo := float64(r.IntN(9_000))
			hi := lo + 100
			return search.Query{Filters: []search.Filter{{Field: "price", Gte: &lo, Lt: &hi}}, Limit: 20}
		}},
		{"knn query", func(r *rand.Rand) search.Query {
			v := make([]float32, searchDims)
			for j := range v {
				v[j] = r.Float32()*2 - 1
			}
			return search.Query{KNN: &search.KNN{Field: "vec", Vector: v, K: 10}, Limit: 10}
		}},
	}
	res := Result{Name: "index", Records: n, Duration: indexDur,
		Note: fmt.Sprintf("%.2f× raw Bleve's indexing of the same documents (%.0f/s); target 0.8×", rawDur.Seconds()/indexDur.Seconds(),
			float64(n)/rawDur.Seconds())}
	res.Also = append(res.Also, Result{Name: "raw bleve", Records: n, Duration: rawDur, Note: "the ceiling: Bleve alone, batches of 1 000"})
	qrng := rand.New(rand.NewPCG(20261129, 4))
	for _, kind := range queries {
		const count = 300
		r := Result{Name: kind.name, Records: count}
		qstart := time.Now()
		for range count {
			t0 := time.Now()
			if _, err := s.Search(ctx, client, kind.q(qrng)); err != nil {
				return Result{}, fmt.Errorf("%s: %w", kind.name, err)
			}
			r.Latencies = append(r.Latencies, time.Since(t0))
		}
		r.Duration = time.Since(qstart)
		r.Note = fmt.Sprintf("at %d documents, the feed growing meanwhile; target p99 < 20 ms", n)
		res.Also = append(res.Also, r)
	}
	close(writes)
	<-writesDone
	// Freshness: a write acknowledged, then found.
	fresh := Result{Name: "searchable after write", Records: 100,
		Note: "from a document's acknowledged write to a search finding it (min_version); target p99 < 1 s after its verdict"}
	frng := rand.New(rand.NewPCG(20261129, 5))
	fstart := time.Now()
	for i := range 100 {
		d := searchDoc(frng, frng.IntN(n), int64(1_000_000+i))
		data, _ := schemas.SaasDocuments.Encode(d)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topics.SaasTopic(client), Key: []byte(client + "/" + d.PK), Value: data}).FirstErr(); err != nil {
			return Result{}, err
		}
		t0 := time.Now()
		if _, err := s.Search(ctx, client, search.Query{Query: "w000", Limit: 1, MinVersion: &search.PKVersion{PK: d.PK, Version: d.Version}}); err != nil {
			return Result{}, fmt.Errorf("freshness: %w", err)
		}
		fresh.Latencies = append(fresh.Latencies, time.Since(t0))
	}
	fresh.Duration = time.Since(fstart)
	res.Also = append(res.Also, fresh)
	return res, nil
}
