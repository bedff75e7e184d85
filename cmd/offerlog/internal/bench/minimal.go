package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The minimal write path is the ceiling of offerlog's writes (issue 49):
// the simplest correct design of the same contract, on the same broker in
// the same run. An HTTP PUT appends a command to a topic and waits; one
// consumer group reads it with a goroutine per partition; each batch reads
// its keys from Pebble, applies every command (the value and a version),
// writes the batch to Pebble, produces the changelog and an event per
// command with acks=all and waits for them, commits, and answers the
// waiting requests in process. No schema, no answers remembered, no
// views: what any correct design pays.
type minimalPath struct {
	cl      *kgo.Client // commands, changelog, events
	db      *pebble.DB
	topic   string
	next    atomic.Uint64
	mu      sync.Mutex
	waiting map[uint64]chan int64 // request id → the version its command made
}

const (
	minimalCommands  = "bench.min.commands"
	minimalChangelog = "bench.min.changelog"
	minimalEvents    = "bench.min.events"
)

// runMinimalWrites serves the minimal write path and drives it as the
// offers scenario drives offerlog's: n PUTs by offerConcurrency clients
// to hot offers (keys of hot ids), each answered once durable.
func runMinimalWrites(ctx context.Context, env *Env, n, hot int) (Result, error) {
	if _, err := env.Admin.CreateTopics(ctx, env.Partitions, 1, nil, minimalCommands, minimalEvents); err != nil {
		return Result{}, err
	}
	if _, err := env.Admin.CreateTopics(ctx, env.Partitions, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, minimalChangelog); err != nil {
		return Result{}, err
	}
	db, err := pebble.Open(filepath.Join(env.StateDir, "minimal"), &pebble.Options{})
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	m := &minimalPath{db: db, topic: minimalCommands, waiting: map[uint64]chan int64{}}
	m.cl, err = kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.ConsumerGroup("bench-minimal"), kgo.ConsumeTopics(minimalCommands), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(10*time.Millisecond), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return Result{}, err
	}
	defer m.cl.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumed := make(chan error, 1)
	go func() { consumed <- m.consume(ctx) }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(m.put)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-served }()
	base := "http://" + ln.Addr().String() + "/v1/offers/"
	r, err := hammer(ctx, n, func(i int) error {
		body := fmt.Sprintf(`{"seller_id":"seller-%d","offer":{"category":"cars","title":"hot %d","price":%d,"currency":"RUB"}}`, i%1000, i, 3000+i)
		return call(ctx, "PUT", base+fmt.Sprint(i%hot), body, http.StatusOK)
	})
	cancel()
	if cerr := <-consumed; cerr != nil && !errors.Is(cerr, context.Canceled) && err == nil {
		err = cerr
	}
	r.Name = "hot-writes-minimal"
	r.Note = fmt.Sprintf("the ceiling: the minimal write path (HTTP, a command topic, a goroutine per partition, Pebble, changelog and event "+
		"acknowledged, answered in process) on the same broker, the hot writes' load on %d offers; %s", hot, r.Note)
	return r, err
}

// put appends the request's command and answers once it is applied.
func (m *minimalPath) put(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := m.next.Add(1)
	answer := make(chan int64, 1)
	m.mu.Lock()
	m.waiting[id] = answer
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.waiting, id)
		m.mu.Unlock()
	}()
	rec := &kgo.Record{Topic: m.topic, Key: []byte(r.URL.Path), Value: body, Headers: []kgo.RecordHeader{{Key: "id", Value: binary.AppendUvarint(nil, id)}}}
	if err := m.cl.ProduceSync(r.Context(), rec).FirstErr(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	select {
	case v := <-answer:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"version":` + strconv.FormatInt(v, 10) + `}`))
	case <-r.Context().Done():
	}
}

// consume applies the commands, a goroutine per partition of each poll.
func (m *minimalPath) consume(ctx context.Context) error {
	for {
		fs := m.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fs.Err0(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.apply(ctx, p.Records); err != nil {
					errs <- err
				}
			}()
		})
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			return err
		}
	}
}

// apply applies one partition's records: the keys' versions read once,
// each command a new version, the batch written to Pebble, the changelog
// and the events acknowledged, then the waiters answered.
func (m *minimalPath) apply(ctx context.Context, recs []*kgo.Record) error {
	versions := map[string]int64{}
	batch := m.db.NewBatch()
	defer batch.Close()
	out := make([]*kgo.Record, 0, 2*len(recs))
	answers := make([][2]uint64, 0, len(recs))
	for _, r := range recs {
		k := string(r.Key)
		v, ok := versions[k]
		if !ok {
			if val, closer, err := m.db.Get(r.Key); err == nil {
				if len(val) >= 8 {
					v = int64(binary.BigEndian.Uint64(val))
				}
				closer.Close()
			} else if !errors.Is(err, pebble.ErrNotFound) {
				return err
			}
		}
		v++
		versions[k] = v
		value := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(r.Value)), uint64(v))
		value = append(value, r.Value...)
		if err := batch.Set(r.Key, value, nil); err != nil {
			return err
		}
		out = append(out, &kgo.Record{Topic: minimalChangelog, Key: r.Key, Value: value},
			&kgo.Record{Topic: minimalEvents, Key: r.Key, Value: value})
		if len(r.Headers) == 1 {
			id, _ := binary.Uvarint(r.Headers[0].Value)
			answers = append(answers, [2]uint64{id, uint64(v)})
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return err
	}
	if err := m.cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return err
	}
	m.mu.Lock()
	for _, a := range answers {
		if ch, ok := m.waiting[a[0]]; ok {
			ch <- int64(a[1])
		}
	}
	m.mu.Unlock()
	return nil
}
