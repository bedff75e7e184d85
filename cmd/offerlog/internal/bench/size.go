package bench

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
	"github.com/offerlog/offerlog/topics"
)

// GOST's size (gost.md): what the size scenario projects its per-offer
// costs to.
const (
	gostActive         = 50_000_000
	gostArchivePerYear = 180_000_000
)

// sizeTopics are the topics whose bytes per offer the size scenario
// reports: every topic one offer's creation writes.
var sizeTopics = []string{topics.OffersCommands, string(topics.OffersTable), topics.OffersEvents, topics.OffersResults,
	topics.CabinetChanges, string(topics.CabinetPresets), topics.PhotosRequests, topics.SchedulerTimers}

// sizeMix is the size scenario's offers: sellers from a Zipf distribution
// with one seller of a fifth of the offers (gost.md's largest sellers have
// about a million of 50 M... the scenario's has a million of 5 M), and
// descriptions, attributes and photos in a mix that reaches the seed's
// limits (MaxOfferBytes) for one offer in a thousand.
type sizeMix struct {
	words   []string
	sellers uint64
}

func newSizeMix(n int) *sizeMix {
	r := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 4096)
	for i := range words {
		b := make([]byte, 3+r.IntN(8))
		for j := range b {
			b[j] = byte('a' + r.IntN(26))
		}
		words[i] = string(b)
	}
	return &sizeMix{words: words, sellers: uint64(max(n/25, 10))}
}

// text returns about n bytes of words drawn with r: text that compresses
// as prose does, not as a repeated string.
func (m *sizeMix) text(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(m.words[r.IntN(len(m.words))])
		b.WriteByte(' ')
	}
	return b.String()
}

// offer returns offer i's seller and content, a function of i.
func (m *sizeMix) offer(i int) (string, *schemas.Offer) {
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	seller := "big-seller"
	if i%5 != 0 {
		seller = fmt.Sprintf("seller-%d", rand.NewZipf(r, 1.2, 1, m.sellers-1).Uint64())
	}
	var desc, attrs, photos int
	switch p := r.Float64(); {
	case p < 0.75:
		desc, attrs, photos = 200, 4, 2
	case p < 0.95:
		desc, attrs, photos = 1000, 10, 5
	case p < 0.995:
		desc, attrs, photos = 4000, 20, 10
	case p < 0.999:
		desc, attrs, photos = 15_000, 40, 20
	default: // the seed's largest: 20 000 of description, 60 attributes of a kilobyte
		desc, attrs, photos = offers.MaxDescription-100, 60, offers.MaxPhotos
	}
	price := int64(1000 + r.IntN(10_000_000))
	o := &schemas.Offer{Category: "cars", Title: m.text(r, 60)[:60], Description: m.text(r, desc)[:desc], Price: &price, Currency: "RUB"}
	for a := range attrs {
		v := m.text(r, 12)
		if desc >= offers.MaxDescription-100 {
			v = m.text(r, 1000)[:1000]
		}
		o.Attributes = append(o.Attributes, schemas.Attribute{Name: fmt.Sprintf("attr-%02d", a), Value: strings.TrimSpace(v)})
	}
	for ph := range photos {
		o.Photos = append(o.Photos, schemas.Photo{SourceURL: fmt.Sprintf("https://img.example/%d/%d.jpg", i, ph)})
	}
	return seller, o
}

// loadSized writes the CREATE commands of offers 0..n-1 of the mix
// straight to offers.commands (the bulk path: what the feeds loader
// writes for a feed's new items) and returns the commands' bytes.
func loadSized(ctx context.Context, kafka *streams.Cluster, n int) (int64, error) {
	cl, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedBytes(256<<20))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	m := newSizeMix(n)
	var total int64
	for i := range n {
		id := offers.IDFrom(uint64(i))
		seller, o := m.offer(i)
		data, err := schemas.OfferCommands.Encode(&schemas.OfferCommand{Kind: schemas.CommandCreate, OfferID: id,
			SellerID: seller, ExpectedVersion: -1, DraftID: id, Offer: o})
		if err != nil {
			return 0, err
		}
		total += int64(len(data))
		cl.Produce(ctx, &kgo.Record{Topic: topics.OffersCommands, Key: []byte(id), Value: data}, nil)
	}
	return total, cl.Flush(ctx)
}

// dirBytes returns the bytes of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// topicBytes returns the bytes of topic's segments in the embedded
// broker's directory dir (kfake's layout: partitions/<topic>-<p>).
func topicBytes(dir, topic string, partitions int32) int64 {
	var n int64
	for p := range partitions {
		n += dirBytes(filepath.Join(dir, "partitions", fmt.Sprintf("%s-%d", url.PathEscape(topic), p)))
	}
	return n
}

// heapInUse returns the Go heap in use once collected (FreeOSMemory
// collects first).
func heapInUse() int64 {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// runSize is the size scenario (issue "GOST at its real size"): it loads
// env.SizeOffers offers of a realistic mix into the aggregate and measures,
// at that size, the load, the bytes an offer costs on the broker (per
// topic), in the aggregate's store and in a cache server's memory, a
// restart on the same disk, the restore of the table onto an empty disk
// (the aggregate's, and the API's view), writes and reads by id through the
// API, reads through a cache server of one shard, and the replay of the
// aggregate; its notes project each to GOST's 50 M active offers and a
// year of archive.
func runSize(ctx context.Context, env *Env) (Result, error) {
	n := env.SizeOffers
	cfg := platform.DefaultConfig()
	cfg.Insecure = true
	cfg.Memory = 1 << 30
	cfg.Brokers, cfg.Client, cfg.DataDir, cfg.HTTPAddr, cfg.GRPCAddr = env.Brokers, env.Cluster.Settings(), env.StateDir, "127.0.0.1:0", ""
	cfg.Partitions, cfg.Logger = env.Partitions, env.Logger
	cfg.Components = []string{platform.ComponentOffers, platform.ComponentCabinet}
	p, err := startPlatform(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = p.stop() }()
	start := time.Now()
	loaded := make(chan error, 1)
	var commandBytes int64
	go func() {
		var err error
		commandBytes, err = loadSized(ctx, env.Cluster, n)
		loaded <- err
	}()
	if err := p.waitOrFail(ctx, env, int64(n), topics.OffersResults); err != nil {
		return Result{}, err
	}
	if err := <-loaded; err != nil {
		return Result{}, err
	}
	if err := committedAll(ctx, env, string(offers.Group), topics.OffersCommands); err != nil {
		return Result{}, err
	}
	load := Result{Records: n, Duration: time.Since(start)}
	if err := committedAll(ctx, env, "cabinet", topics.CabinetChanges); err != nil {
		return Result{}, err
	}
	if err := p.stop(); err != nil {
		return Result{}, err
	}
	perOffer := func(b int64) float64 { return float64(b) / float64(n) }
	var notes []string
	var brokerTotal int64
	var perTopic []string
	for _, t := range sizeTopics {
		b := topicBytes(env.BrokerDir, t, env.Partitions)
		brokerTotal += b
		perTopic = append(perTopic, fmt.Sprintf("%s %.0f", t, perOffer(b)))
	}
	tableBytes := topicBytes(env.BrokerDir, string(topics.OffersTable), env.Partitions)
	storeBytes := dirBytes(filepath.Join(env.StateDir, "state", "processor", string(offers.Group)))
	notes = append(notes, fmt.Sprintf("%d offers (commands of %.0f bytes on average; sellers Zipf over %d, one of %d) loaded by "+
		"CREATE commands written straight to offers.commands (the bulk path a feed takes), timed from the first command to the "+
		"last answer, the cabinet caught up after", n, perOffer(commandBytes), max(n/25, 10), (n+4)/5))
	notes = append(notes, fmt.Sprintf("bytes per offer on the broker (segments, compression %s): %s; all %.0f",
		env.Cluster.Settings().Compression, strings.Join(perTopic, ", "), perOffer(brokerTotal)))
	notes = append(notes, fmt.Sprintf("bytes per offer in the aggregate's local store (Pebble, every partition): %.0f", perOffer(storeBytes)))

	// Restart on the same disk, timed to ready.
	t := time.Now()
	if p, err = startPlatform(ctx, cfg); err != nil {
		return Result{}, err
	}
	restart := Result{Name: "restart", Records: n, Duration: time.Since(t),
		Note: "the aggregate and the cabinet restarted on their disk, timed from the start to every component ready"}
	if err := p.stop(); err != nil {
		return Result{}, err
	}

	// The aggregate's table restored onto an empty disk: every partition
	// read from the changelog by the group's one member.
	if err := os.RemoveAll(filepath.Join(env.StateDir, "state")); err != nil {
		return Result{}, err
	}
	rcfg := cfg
	rcfg.Components = []string{platform.ComponentOffers}
	t = time.Now()
	if p, err = startPlatform(ctx, rcfg); err != nil {
		return Result{}, err
	}
	rd := time.Since(t)
	restore := Result{Name: "restore", Records: n, Duration: rd,
		Note: fmt.Sprintf("the aggregate's store rebuilt from offers-table onto an empty disk, all %d partitions by one member: "+
			"%.1f MB/s of changelog, %.1f s a partition of %.0f MB", env.Partitions, float64(tableBytes)/1e6/rd.Seconds(),
			rd.Seconds()/float64(env.Partitions), float64(tableBytes)/1e6/float64(env.Partitions))}
	if err := p.stop(); err != nil {
		return Result{}, err
	}

	// Writes and reads by id through the API (its view of offers-table,
	// built onto an empty disk: a restore of the whole table too).
	acfg := cfg
	acfg.Components = []string{platform.ComponentOffers, platform.ComponentCabinet, platform.ComponentDrafts, platform.ComponentAPI}
	t = time.Now()
	if p, err = startPlatform(ctx, acfg); err != nil {
		return Result{}, err
	}
	viewBuilt := time.Since(t)
	base := "http://" + p.info.HTTPAddr
	ids := func(i int) string { return offers.IDFrom(uint64((i * 7919) % n)) }
	m := newSizeMix(n)
	writes, err := hammer(ctx, min(n, 20_000), func(i int) error {
		seller, _ := m.offer((i * 7919) % n)
		body := fmt.Sprintf(`{"seller_id":%q,"expected_version":-1,"offer":{"category":"cars","title":"updated %d","price":%d,"currency":"RUB"}}`,
			seller, i, 2000+i)
		return call(ctx, "PUT", base+"/v1/offers/"+ids(i), body, http.StatusOK)
	})
	if err != nil {
		return Result{}, fmt.Errorf("writes: %w", err)
	}
	writes.Name = "writes"
	writes.Note = fmt.Sprintf("updates through the HTTP API at this size, acknowledged once durable and shown by the API's view; "+
		"the view was built onto an empty disk at the start in %.1f s (%.1f MB/s of offers-table); %s",
		viewBuilt.Seconds(), float64(tableBytes)/1e6/viewBuilt.Seconds(), writes.Note)
	reads, err := hammer(ctx, min(100_000, 10*n), func(i int) error {
		return call(ctx, "GET", base+"/v1/offers/"+offers.IDFrom(uint64((i*104_729)%n)), "", http.StatusOK)
	})
	if err != nil {
		return Result{}, fmt.Errorf("reads: %w", err)
	}
	reads.Name = "reads"
	reads.Note = "reads by id through the HTTP API (its view: a Pebble store of the whole table on disk); " + reads.Note
	if err := p.stop(); err != nil {
		return Result{}, err
	}

	cached, cacheBytes, err := sizeCacheReads(ctx, env, n)
	if err != nil {
		return Result{}, fmt.Errorf("cache: %w", err)
	}

	failover, err := sizeFailover(ctx, env)
	if err != nil {
		return Result{}, fmt.Errorf("failover: %w", err)
	}

	// The replay of the aggregate from its commands.
	if err := os.RemoveAll(filepath.Join(env.StateDir, "state")); err != nil {
		return Result{}, err
	}
	total, err := recordsIn(ctx, env, topics.OffersCommands)
	if err != nil {
		return Result{}, err
	}
	t = time.Now()
	err = offers.Replay(ctx, offers.Config{Streams: table.Config{Cluster: env.Cluster, StateDir: filepath.Join(env.StateDir, "replay"),
		Replication: 1, Logger: env.Logger}}, env.Partitions, -1)
	if err != nil {
		return Result{}, fmt.Errorf("replay: %w", err)
	}
	replay := Result{Name: "replay", Records: int(total), Duration: time.Since(t),
		Note: "`offerlog replay offers`: the table recreated and rebuilt from every command"}
	_ = os.RemoveAll(filepath.Join(env.StateDir, "replay"))

	// Projections to GOST's size, from the per-offer costs measured.
	gb := func(perOffer float64, offers int) float64 { return perOffer * float64(offers) / 1e9 }
	activeTable := gb(perOffer(tableBytes), gostActive)
	partitionsFor := func(seconds float64) int {
		return int(math.Ceil(activeTable * 1e3 / (seconds * float64(tableBytes) / 1e6 / rd.Seconds())))
	}
	notes = append(notes, fmt.Sprintf("projected to %d M active offers: offers-table %.0f GB on the broker (%.0f GB a year of archive, "+
		"%d M records), all topics %.0f GB; the aggregate's stores %.0f GB; a cache of the whole table %.0f GB of memory "+
		"(%.0f bytes an offer): %d cache shards of 16 GB; a table restored at this machine's rate in %.0f s with %d partitions, "+
		"in under a minute a partition with %d partitions, and replayed in %.0f min",
		gostActive/1_000_000, activeTable, gb(perOffer(tableBytes), gostArchivePerYear), gostArchivePerYear/1_000_000,
		gb(perOffer(brokerTotal), gostActive), gb(perOffer(storeBytes), gostActive), gb(cacheBytes, gostActive), cacheBytes,
		int(math.Ceil(gb(cacheBytes, gostActive)/16)), rd.Seconds()*float64(gostActive)/float64(n)/float64(env.Partitions),
		env.Partitions, partitionsFor(60), replay.Duration.Seconds()*float64(gostActive)/float64(n)/60))
	load.Note = strings.Join(notes, "; ")
	load.Also = []Result{restart, restore, failover, writes, reads, cached, replay}
	return load, nil
}

// sizeFailover runs two members of the aggregate's group on empty disks,
// the second with standby copies (--standby), waits until its copies of
// the first's partitions reach the changelog's end, stops the first and
// times the second's takeover of every partition: how long a failover
// takes, and how many changelog records it reads, when the member taking
// over keeps a warm copy.
func sizeFailover(ctx context.Context, env *Env) (Result, error) {
	g := offers.Graph(offers.Config{})
	member := func(name string, standby bool) *table.Group {
		return g.TableGroup(table.Config{Cluster: env.Cluster, StateDir: filepath.Join(env.StateDir, name), Replication: 1,
			Standby: standby, Logger: env.Logger}, nil)
	}
	run := func(m *table.Group) (stop func() error) {
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- m.Run(mctx) }()
		return func() error { cancel(); return <-done }
	}
	a, b := member("member-a", false), member("member-b", true)
	start := time.Now()
	stopA := run(a)
	stopB := run(b)
	defer func() { _ = stopB() }()
	poll := func(what string, done func() bool) error {
		for !done() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: %w", what, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
		return nil
	}
	partitions := int(env.Partitions)
	err := poll("the standby's copies", func() bool {
		ends, err := env.Admin.ListEndOffsets(ctx, string(topics.OffersTable))
		if err != nil || a.Current()+b.Current() != partitions {
			return false
		}
		held, ok := b.Offsets(), true
		ends.Each(func(o kadm.ListedOffset) { ok = ok && held[o.Partition] == o.Offset-1 })
		return ok
	})
	if err != nil {
		_ = stopA()
		return Result{}, err
	}
	warm := time.Since(start)
	before := b.Restored()
	t := time.Now()
	if err := stopA(); err != nil {
		return Result{}, err
	}
	if err := poll("the takeover", func() bool { return b.Current() == partitions }); err != nil {
		return Result{}, err
	}
	took := time.Since(t)
	read := b.Restored() - before
	return Result{Name: "failover", Records: int(read), Duration: took,
		Note: fmt.Sprintf("two members of the aggregate's group, the second with --standby: its warm copies built from an empty disk in %.0f s; "+
			"the first stopped, the second held all %d partitions %.2f s later, reading %d changelog records (the restore reads every one)",
			warm.Seconds(), partitions, took.Seconds(), read)}, nil
}

// sizeCacheReads materialises one shard of offers-table (one partition of
// env.Partitions) in a cache server, measures the memory it takes per key,
// and reads keys of that shard through the serving client, one key a Get,
// from 64 callers.
func sizeCacheReads(ctx context.Context, env *Env, n int) (Result, float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, 0, err
	}
	shards := int(env.Partitions)
	srv, err := serving.NewServer(serving.ServerConfig{Cluster: env.Cluster, Table: string(topics.OffersTable), Shards: shards, DC: "dc1", Host: "a",
		Owner: serving.Static{Shard: 0}, Logger: env.Logger})
	if err != nil {
		return Result{}, 0, err
	}
	before := heapInUse()
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	for !srv.Ready() {
		select {
		case err := <-done:
			return Result{}, 0, fmt.Errorf("cache server stopped: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	loadTime := time.Since(start)
	var keys []string
	for i := range n {
		if id := offers.IDFrom(uint64(i)); streams.Partition(id, env.Partitions) == 0 {
			keys = append(keys, id)
		}
	}
	perKey := float64(heapInUse()-before) / float64(max(len(keys), 1))
	client := serving.NewClient(serving.ClientConfig{Table: string(topics.OffersTable), Hosts: serving.StaticHosts(ln.Addr().String()), Logger: env.Logger})
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go client.Run(cctx)
	for len(client.Shards()) < 1 {
		select {
		case <-ctx.Done():
			return Result{}, 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	r, err := hammer(ctx, min(100_000, 10*len(keys)), func(i int) error {
		k := keys[(i*7919)%len(keys)]
		got, err := client.Get(ctx, []string{k})
		if err == nil && got[k] == nil {
			err = fmt.Errorf("%s not found", k)
		}
		return err
	})
	if err != nil {
		return Result{}, 0, err
	}
	r.Name = "reads-cache"
	r.Note = fmt.Sprintf("a cache server of one shard of %d (%d offers) materialised in %.1f s, %.0f bytes of Go heap an offer; "+
		"Gets of one key through the serving client; %s", shards, len(keys), loadTime.Seconds(), perKey, r.Note)
	return r, perKey, nil
}
