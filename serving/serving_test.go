package serving_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/internal/zkconn"
	"github.com/offerlog/offerlog/schemas/proto/servingv1"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/topics"
)

func TestRange(t *testing.T) {
	for _, tt := range []struct {
		i, n       int
		partitions int32
		lo, hi     int32
	}{{0, 4, 8, 0, 2}, {3, 4, 8, 6, 8}, {0, 3, 8, 0, 3}, {1, 3, 8, 3, 6}, {2, 3, 8, 6, 8}, {0, 1, 5, 0, 5}} {
		lo, hi, err := serving.Range(tt.i, tt.n, tt.partitions)
		if err != nil || lo != tt.lo || hi != tt.hi {
			t.Errorf("Range(%d, %d, %d) = [%d,%d) %v, want [%d,%d)", tt.i, tt.n, tt.partitions, lo, hi, err, tt.lo, tt.hi)
		}
	}
	for _, bad := range [][3]int{{4, 4, 8}, {0, 0, 8}, {0, 9, 8}, {-1, 2, 8}} {
		if _, _, err := serving.Range(bad[0], bad[1], int32(bad[2])); err == nil {
			t.Errorf("Range%v accepted", bad)
		}
	}
}

const table = "cache.test"

// cluster is a set of cache servers of one table, in two data centres.
type cluster struct {
	t       *testing.T
	brokers []string
	zk      string
	servers map[string]*node // by dc/host
	shards  map[string]int   // by dc, when not 4
	// virtual, if set, cuts the table by hash ranges of that many
	// virtual shards (DialHashOwner).
	virtual int
}

type node struct {
	srv   *serving.Server
	owner *serving.ZooKeeper
	addr  string
	stop  func()
	keys  *metrics.Counter // keys the server answered
}

func (c *cluster) start(dc, host string) *node {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	shards := 4
	if n := c.shards[dc]; n > 0 {
		shards = n
	}
	ctx, cancel := context.WithCancel(context.Background())
	dial := serving.DialOwner
	if c.virtual > 0 {
		dial = serving.DialHashOwner
	}
	owner, err := dial(ctx, c.zk, table, dc, host, ln.Addr().String(), shards, testkit.Logger())
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	reg := metrics.New()
	srv, err := serving.NewServer(serving.ServerConfig{Cluster: testkit.Cluster(c.t, c.brokers), Table: table, Shards: shards, DC: dc, Host: host,
		Owner: owner, Virtual: c.virtual, Metrics: reg, Logger: testkit.Logger()})
	if err != nil {
		c.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	n := &node{srv: srv, owner: owner, addr: ln.Addr().String(),
		keys: reg.Counter("offerlog_cache_keys_total", "Keys the cache answered (found or not).").With()}
	stopped := false
	n.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				c.t.Errorf("%s/%s: %v", dc, host, err)
			}
		}
	}
	c.t.Cleanup(n.stop)
	c.servers[dc+"/"+host] = n
	return n
}

// loaded waits until every server holds a loaded shard.
func (c *cluster) loaded(what string) {
	c.t.Helper()
	testkit.Eventually(c.t, 30*time.Second, what, func() bool {
		for _, n := range c.servers {
			if !n.srv.Ready() {
				return false
			}
		}
		return true
	})
}

func (c *cluster) shardOf(n *node) *servingv1.Shard {
	c.t.Helper()
	resp := get(c.t, n.addr, nil)
	return resp.Shard
}

// serve serves srv on a real socket until the test ends (Serve's error
// fails it), and returns its address.
func serve(t *testing.T, srv *serving.Server) string { return testkit.Serve(t, srv.Serve) }

func get(t *testing.T, addr string, keys []string) *servingv1.GetResponse {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := servingv1.NewCacheClient(conn).Get(ctx, &servingv1.GetRequest{Keys: keys})
	if err != nil {
		t.Fatalf("Get %v from %s: %v", keys, addr, err)
	}
	return resp
}

func produce(t *testing.T, brokers []string, kv map[string]string) {
	t.Helper()
	cl := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	var recs []*kgo.Record
	for k, v := range kv {
		recs = append(recs, &kgo.Record{Topic: table, Key: []byte(k), Value: []byte(v)})
	}
	if err := cl.ProduceSync(testkit.Context(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestTwoDataCentresOfFourShards(t *testing.T) {
	zkAddr := testkit.ZooKeeper(t)
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: table, Partitions: 8, Compacted: true}})
	values := map[string]string{}
	for i := range 200 {
		values[fmt.Sprint("key-", i)] = fmt.Sprint("value-", i)
	}
	produce(t, brokers, values)

	c := &cluster{t: t, brokers: brokers, zk: zkAddr, servers: map[string]*node{}}
	for _, dc := range []string{"a", "b"} {
		for h := range 4 {
			c.start(dc, fmt.Sprint(dc, "-host-", h))
		}
	}
	c.loaded("every server holds a loaded shard")
	// One owner per shard per data centre.
	for _, dc := range []string{"a", "b"} {
		seen := map[int32]string{}
		for h := range 4 {
			host := fmt.Sprint(dc, "-host-", h)
			s := c.shardOf(c.servers[dc+"/"+host])
			if other, dup := seen[s.Lo]; dup {
				t.Fatalf("dc %s: %s and %s hold shard [%d,%d)", dc, other, host, s.Lo, s.Hi)
			}
			seen[s.Lo] = host
		}
	}

	// Empty and wrong-shard Gets.
	a0 := c.servers["a/a-host-0"]
	shard := c.shardOf(a0)
	if resp := get(t, a0.addr, nil); !resp.AllMatched || len(resp.Entries) != 0 || resp.Shard == nil {
		t.Errorf("empty Get: %v", resp)
	}
	var inside, outside string
	for k := range values {
		if serving.Holds(shard, k) {
			inside = k
		} else {
			outside = k
		}
	}
	if resp := get(t, a0.addr, []string{inside, outside}); resp.AllMatched || len(resp.Entries) != 0 || resp.Shard.Lo != shard.Lo {
		t.Errorf("wrong-shard Get: %v", resp)
	}
	missing := "missing"
	for i := 0; !serving.Holds(shard, missing); i++ {
		missing = fmt.Sprint("missing-", i)
	}
	resp := get(t, a0.addr, []string{inside, missing})
	if !resp.AllMatched || len(resp.Entries) != 2 || !resp.Entries[0].Found || string(resp.Entries[0].Value) != values[inside] || resp.Entries[1].Found {
		t.Errorf("Get in the shard: %v", resp)
	}

	zconn, _, err := zkconn.Dial(testkit.Context(t, 30*time.Second), zkAddr, 4*time.Second, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer zconn.Close()
	client := serving.NewClient(serving.ClientConfig{
		Hosts:      func(context.Context) ([]string, error) { return serving.Hosts(zconn, table) },
		PingPeriod: 200 * time.Millisecond, Timeout: 300 * time.Millisecond, Retries: 1,
		NoShardWait: 2 * time.Second, Logger: testkit.Logger()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go client.Run(ctx)
	testkit.Eventually(t, 10*time.Second, "the client knows the 8 servers", func() bool { return len(client.Shards()) == 8 })

	all := func(what string) {
		t.Helper()
		var keys []string
		for k := range values {
			keys = append(keys, k)
		}
		for i := 0; i < len(keys); i += 10 {
			got, err := client.Get(ctx, keys[i:i+10])
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for _, k := range keys[i : i+10] {
				if string(got[k]) != values[k] {
					t.Fatalf("%s: %s = %q, want %q", what, k, got[k], values[k])
				}
			}
		}
	}
	all("both data centres up")
	if got, err := client.Get(ctx, []string{"key-never-written"}); err != nil || len(got) != 0 {
		t.Errorf("a key the table does not hold: %v %v", got, err)
	}

	// A killed server: the other data centre answers.
	killed := c.servers["a/a-host-1"]
	before := c.shardOf(killed)
	killed.stop()
	all("one server of data centre a killed")

	// Restarted, it takes its old shard back.
	back := c.start("a", "a-host-1")
	testkit.Eventually(t, 30*time.Second, "the restarted server is loaded", back.srv.Ready)
	if after := c.shardOf(back); after.Lo != before.Lo || after.Generation <= before.Generation {
		t.Errorf("restarted server took [%d,%d) gen %d, held [%d,%d) gen %d", after.Lo, after.Hi, after.Generation, before.Lo, before.Hi, before.Generation)
	}

	// Values stay fresh.
	k := inside
	produce(t, brokers, map[string]string{k: "fresh"})
	testkit.Eventually(t, 10*time.Second, "the new value", func() bool {
		got, err := client.Get(ctx, []string{k})
		return err == nil && string(got[k]) == "fresh"
	})
	values[k] = "fresh"

	// A shard nobody holds: Get waits for an owner, then reports the key.
	var owners []*node
	for _, n := range c.servers {
		if s := c.shardOf(n); s.Lo == shard.Lo {
			owners = append(owners, n)
		}
	}
	if len(owners) != 2 {
		t.Fatalf("%d owners of shard [%d,%d)", len(owners), shard.Lo, shard.Hi)
	}
	for _, n := range owners {
		n.stop()
	}
	testkit.Eventually(t, 10*time.Second, "the client forgets the stopped owners", func() bool { return len(client.Shards()) == 6 })
	got := make(chan error, 1)
	go func() { _, err := client.Get(ctx, []string{k}); got <- err }()
	time.Sleep(300 * time.Millisecond) // the Get is waiting for a shard now
	revived := c.start("a", "a-host-0")
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a Get waiting for its shard: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a Get waiting for its shard did not return")
	}
	revived.stop()
	testkit.Eventually(t, 10*time.Second, "the client forgets it again", func() bool { return len(client.Shards()) == 6 })
	start := time.Now()
	if _, err := client.Get(ctx, []string{k}); !errors.Is(err, serving.ErrNoShard) || time.Since(start) < 2*time.Second {
		t.Errorf("Get of a key nobody holds: %v after %s", err, time.Since(start))
	}

	// A server whose ZooKeeper session goes stops answering at once, and
	// says so with its shard (none: an empty range of its host).
	b2 := c.servers["b/b-host-2"]
	b2.owner.Close()
	testkit.Eventually(t, 2*time.Second, "the server without a session refuses, naming no shard", func() bool {
		conn, err := grpc.NewClient(b2.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return false
		}
		defer conn.Close()
		_, err = servingv1.NewCacheClient(conn).Get(ctx, &servingv1.GetRequest{})
		sh := serving.ShardOf(err)
		return status.Code(err) == codes.Unavailable && sh != nil && sh.Hi == sh.Lo && sh.Host == "b-host-2" && sh.Table == table
	})
}

// TestGetsStayInTheirDataCentre: a client of data centre a asks a's
// replicas only while they answer; when one is away, the other data
// centre answers its keys at once, not after the hedge.
func TestGetsStayInTheirDataCentre(t *testing.T) {
	zkAddr := testkit.ZooKeeper(t)
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: table, Partitions: 8, Compacted: true}})
	values := map[string]string{}
	var keys []string
	for i := range 100 {
		k := fmt.Sprint("key-", i)
		values[k] = fmt.Sprint("value-", i)
		keys = append(keys, k)
	}
	produce(t, brokers, values)
	c := &cluster{t: t, brokers: brokers, zk: zkAddr, servers: map[string]*node{}}
	for _, dc := range []string{"a", "b"} {
		for h := range 4 {
			c.start(dc, fmt.Sprint(dc, "-host-", h))
		}
	}
	c.loaded("every server holds a loaded shard")
	zconn, _, err := zkconn.Dial(testkit.Context(t, 30*time.Second), zkAddr, 4*time.Second, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer zconn.Close()
	client := serving.NewClient(serving.ClientConfig{
		Hosts:      func(context.Context) ([]string, error) { return serving.Hosts(zconn, table) },
		PingPeriod: 200 * time.Millisecond, Timeout: 300 * time.Millisecond, Retries: 1, DC: "a", Hedge: time.Minute,
		NoShardWait: 2 * time.Second, Logger: testkit.Logger()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go client.Run(ctx)
	testkit.Eventually(t, 10*time.Second, "the client knows the 8 servers", func() bool { return len(client.Shards()) == 8 })
	answered := func(dc string) (n uint64) {
		for name, s := range c.servers {
			if name[:1] == dc {
				n += s.keys.Value()
			}
		}
		return n
	}
	getAll := func(what string) {
		t.Helper()
		for i := 0; i < len(keys); i += 10 {
			got, err := client.Get(ctx, keys[i:i+10])
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for _, k := range keys[i : i+10] {
				if string(got[k]) != values[k] {
					t.Fatalf("%s: %s = %q", what, k, got[k])
				}
			}
		}
	}
	getAll("both data centres up")
	if a, b := answered("a"), answered("b"); a != uint64(len(keys)) || b != 0 {
		t.Errorf("data centre a answered %d keys and b %d, want a all %d and b none", a, b, len(keys))
	}
	// A replica of a away: its keys are asked of b at once, not after the
	// minute's hedge.
	c.servers["a/a-host-2"].stop()
	start := time.Now()
	getAll("one server of a away")
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the Gets waited %s: for the hedge, not for the failure", d)
	}
	if answered("b") == 0 {
		t.Error("data centre b answered nothing while a replica of a was away")
	}
}

// TestReshardOneDataCentreAtATime: each data centre's shard count is kept
// in ZooKeeper; a data centre is cut anew by stopping all its servers and
// starting them with the new count, one data centre at a time, while a
// client reads every key throughout; a server with another count than its
// running data centre's is refused, saying how to reshard.
func TestReshardOneDataCentreAtATime(t *testing.T) {
	zkAddr, brokers, keys, values := keyed(t, 64)
	c := &cluster{t: t, brokers: brokers, zk: zkAddr, servers: map[string]*node{}, shards: map[string]int{}}
	start := func(dc string, n int) {
		for h := range n {
			c.start(dc, fmt.Sprint(dc, "-host-", h))
		}
	}
	start("a", 4)
	start("b", 4)
	c.loaded("both data centres loaded")
	zconn, _, err := zkconn.Dial(testkit.Context(t, 30*time.Second), zkAddr, 4*time.Second, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer zconn.Close()
	counts := func() map[string]int {
		got, err := serving.Shards(zconn, table)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := counts(); got["a"] != 4 || got["b"] != 4 {
		t.Fatalf("recorded shard counts %v, want 4 and 4", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := zkClient(ctx, zconn)
	testkit.Eventually(t, 10*time.Second, "the client knows the 8 servers", func() bool { return len(client.Shards()) == 8 })
	// A reader asks for every key throughout; each answer must be whole.
	r := startReader(ctx, client, keys, values)
	reshard := func(dc string, from, to int) {
		t.Helper()
		for h := range from {
			name := fmt.Sprint(dc, "/", dc, "-host-", h)
			c.servers[name].stop()
			delete(c.servers, name)
		}
		c.shards[dc] = to
		start(dc, to)
		c.loaded(dc + " loaded in its new cut")
		if got := counts(); got[dc] != to {
			t.Fatalf("recorded shard counts %v, want %s at %d", got, dc, to)
		}
		// As an operator would: the next data centre goes once the
		// clients know this one's new servers.
		testkit.Eventually(t, 10*time.Second, "the client knows "+dc+"'s new servers", func() bool {
			return len(client.Shards()) == len(c.servers)
		})
	}
	reshard("a", 4, 2)
	reshard("b", 4, 8)
	// A server of a with b's old count is refused while a runs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := serving.DialOwner(testkit.Context(t, 30*time.Second), zkAddr, table, "a", "a-host-9", ln.Addr().String(), 4, testkit.Logger()); err == nil ||
		!strings.Contains(err.Error(), "cut into 2 shards") {
		t.Errorf("a server of another count in a running data centre: %v", err)
	}
	if err := r.stop(); err != nil {
		t.Errorf("a read while resharding: %v", err)
	}
	if r.reads.Load() == 0 {
		t.Error("no read was made while resharding")
	}
}

// zkClient runs, until ctx ends, a client of the servers ZooKeeper names,
// quick to notice them come and go.
func zkClient(ctx context.Context, zconn *zk.Conn) *serving.Client {
	client := serving.NewClient(serving.ClientConfig{
		Hosts:      func(context.Context) ([]string, error) { return serving.Hosts(zconn, table) },
		PingPeriod: 200 * time.Millisecond, Timeout: 300 * time.Millisecond, Retries: 1, NoShardWait: 5 * time.Second,
		Logger: testkit.Logger()})
	go client.Run(ctx)
	return client
}

// keyed starts ZooKeeper and a broker, and writes n keys to the table
// topic of 8 partitions; it returns them and their values.
func keyed(t *testing.T, n int) (zkAddr string, brokers, keys []string, values map[string]string) {
	t.Helper()
	zkAddr = testkit.ZooKeeper(t)
	brokers = testkit.Broker(t, "").Addrs()
	testkit.EnsureTopics(t, brokers, []topics.Topic{{Name: table, Partitions: 8, Compacted: true}})
	values = map[string]string{}
	for i := range n {
		k := fmt.Sprint("key-", i)
		values[k], keys = fmt.Sprint("value-", i), append(keys, k)
	}
	produce(t, brokers, values)
	return zkAddr, brokers, keys, values
}

// reader asks a client for every key of values, again and again, until
// stopped, and keeps the first wrong or failed answer.
type reader struct {
	reads atomic.Int64
	stop  func() error
}

func startReader(ctx context.Context, client *serving.Client, keys []string, values map[string]string) *reader {
	r := &reader{}
	stopping, done := make(chan struct{}), make(chan struct{})
	var first error
	go func() {
		defer close(done)
		for {
			select {
			case <-stopping:
				return
			default:
			}
			got, err := client.Get(ctx, keys)
			for _, k := range keys {
				if err == nil && string(got[k]) != values[k] {
					err = fmt.Errorf("%s = %q, want %q", k, got[k], values[k])
				}
			}
			if err != nil && first == nil {
				first = err
			}
			r.reads.Add(1)
		}
	}()
	r.stop = func() error {
		close(stopping)
		<-done
		return first
	}
	return r
}

// TestGrowADataCentreByAddingServers cuts a table of 8 partitions by hash
// ranges (1024 virtual shards): a data centre of 2 servers, each holding
// only the keys of its half, grows to 4 by starting the 4 servers of the
// new count beside them (more shards than a server per two partitions
// would allow) and stopping the old ones once the new are loaded, while a
// reader asks for every key throughout through the client: every answer is
// whole and right. Each new server holds only its quarter of the keys.
func TestGrowADataCentreByAddingServers(t *testing.T) {
	zkAddr, brokers, keys, values := keyed(t, 400)
	c := &cluster{t: t, brokers: brokers, zk: zkAddr, servers: map[string]*node{}, shards: map[string]int{"a": 2}, virtual: serving.DefaultVirtual}
	c.start("a", "a-host-0")
	c.start("a", "a-host-1")
	c.loaded("two servers of a")
	for _, n := range c.servers {
		if k := n.srv.Keys(); k == 0 || k >= len(keys) {
			t.Fatalf("a server of 2 holds %d keys of %d: not its half", k, len(keys))
		}
	}
	zconn, _, err := zkconn.Dial(testkit.Context(t, 30*time.Second), zkAddr, 4*time.Second, testkit.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer zconn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := zkClient(ctx, zconn)
	testkit.Eventually(t, 10*time.Second, "the client knows the 2 servers", func() bool { return len(client.Shards()) == 2 })
	r := startReader(ctx, client, keys, values)
	c.shards["a"] = 4
	for h := 2; h < 6; h++ {
		c.start("a", fmt.Sprint("a-host-", h))
	}
	c.loaded("the 4 new servers loaded beside the old 2")
	testkit.Eventually(t, 10*time.Second, "the client knows the 6 servers", func() bool { return len(client.Shards()) == 6 })
	for h := range 2 {
		name := fmt.Sprint("a/a-host-", h)
		c.servers[name].stop()
		delete(c.servers, name)
	}
	testkit.Eventually(t, 10*time.Second, "the client forgets the old servers", func() bool { return len(client.Shards()) == 4 })
	before := r.reads.Load()
	testkit.Eventually(t, 10*time.Second, "reads go on against the 4", func() bool { return r.reads.Load() > before+5 })
	if err := r.stop(); err != nil {
		t.Errorf("a read while growing: %v", err)
	}
	held := 0
	for name, n := range c.servers {
		k := n.srv.Keys()
		if k == 0 || k > len(keys)/2 {
			t.Errorf("%s, one of 4, holds %d keys of %d", name, k, len(keys))
		}
		held += k
	}
	if held != len(keys) {
		t.Errorf("the 4 servers hold %d keys, the table %d: a key in none or in two", held, len(keys))
	}
}
