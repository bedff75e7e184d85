package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/offerlog/offerlog/schemas/proto/servingv1"
	"github.com/offerlog/offerlog/streams"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Hosts returns the gRPC addresses of the servers to know (every data
	// centre): a static list, or Hosts of ZooKeeper.
	Hosts func(ctx context.Context) ([]string, error)
	// PingPeriod is how often the client refreshes its hosts and asks each
	// for its shard with an empty Get (default 1 s); a key with no known
	// shard is looked up again after it.
	PingPeriod time.Duration
	// Timeout bounds one request to one host (default 500 ms); Retries is
	// how many times a failed request to a host is sent again (default 2).
	Timeout time.Duration
	Retries int
	// NoShardWait is how long Get waits for a shard to appear for a key
	// before reporting it (default 3 ping periods).
	NoShardWait time.Duration
	// DialOptions are added to every connection's (credentials: the
	// servers of a platform with auth on take admin tokens only).
	DialOptions []grpc.DialOption
	// Table, if set, is the only table whose shards Get routes to: a
	// server of another table in Hosts is passed over.
	Table string
	// DC is the caller's data centre. With it, Get asks the replicas of
	// its own data centre first and those of the others only after Hedge,
	// or at once when a local replica fails or none holds some keys: read
	// load does not grow with the number of data centres. Without it (or
	// with a negative Hedge), Get asks every replica at once, as the seed
	// does.
	DC string
	// Hedge is how long Get waits for its own data centre before asking
	// the others (default 50 ms; negative: at once, the seed's fan-out).
	Hedge time.Duration
	// MaxInFlight is how many requests the client has in flight to one
	// host (default DefaultMaxInFlight); the Gets that come meanwhile go
	// together in one request as soon as one is answered.
	MaxInFlight int
	Logger      *slog.Logger
}

// Client is the cache client of the seed: Get sends every key to the known
// replicas of its shard, and returns as soon as each key has an answer.
// Those of its own data centre (ClientConfig.DC) are asked first, the
// others after a hedge delay or a local failure; without a DC, every
// replica at once (the seed's fan-out). Safe for concurrent use.
type Client struct {
	cfg ClientConfig

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	// refused is the last refusal of the client's credentials by a server.
	refused error
	shards  map[string]*servingv1.Shard // by host address, the newest heard of
	// answered is every host's last shard, kept when the host is forgotten:
	// what an error about keys nobody holds tells.
	answered map[string]*servingv1.Shard
	pinged   chan struct{} // closed and replaced after every ping round
	batches  map[batchKey]*batch
}

// ErrNoShard is returned when keys belong to no shard any known server
// holds; ErrUnanswered when every replica of their shard failed.
var (
	ErrNoShard    = errors.New("serving: no server holds the shard of some keys")
	ErrUnanswered = errors.New("serving: every replica of the shard of some keys failed")
)

// NewClient returns a client; Run keeps its view of the shards fresh.
func NewClient(cfg ClientConfig) *Client {
	if cfg.PingPeriod <= 0 {
		cfg.PingPeriod = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	if cfg.Retries < 0 {
		cfg.Retries = 0
	} else if cfg.Retries == 0 {
		cfg.Retries = 2
	}
	if cfg.NoShardWait <= 0 {
		cfg.NoShardWait = 3 * cfg.PingPeriod
	}
	if cfg.Hedge == 0 {
		cfg.Hedge = 50 * time.Millisecond
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}, shards: map[string]*servingv1.Shard{},
		answered: map[string]*servingv1.Shard{}, pinged: make(chan struct{}), batches: map[batchKey]*batch{}}
}

// StaticHosts returns a Hosts function of a fixed list.
func StaticHosts(addrs ...string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) { return addrs, nil }
}

// Run pings every PingPeriod until ctx is done, then closes the client's
// connections.
func (c *Client) Run(ctx context.Context) error {
	defer c.close()
	t := time.NewTicker(c.cfg.PingPeriod)
	defer t.Stop()
	for {
		c.Ping(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Ping refreshes the hosts and asks each for its shard.
func (c *Client) Ping(ctx context.Context) {
	hosts, err := c.cfg.Hosts(ctx)
	if err != nil {
		c.cfg.Logger.Warn("serving: hosts", "err", err)
	}
	c.mu.Lock()
	for h, conn := range c.conns {
		if err == nil && !slices.Contains(hosts, h) {
			conn.Close()
			delete(c.conns, h)
			delete(c.shards, h)
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.call(ctx, h, nil, false)
			if err != nil {
				c.forget(h)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			// A server that refuses the client's credentials will go on
			// refusing them: Get says so rather than wait for a shard.
			if code := status.Code(err); code == codes.Unauthenticated || code == codes.PermissionDenied {
				c.refused = fmt.Errorf("%s: %w", h, err)
			} else if err == nil {
				c.refused = nil
			}
		}()
	}
	wg.Wait()
	c.mu.Lock()
	close(c.pinged)
	c.pinged = make(chan struct{})
	c.mu.Unlock()
}

func (c *Client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, conn := range c.conns {
		conn.Close()
		delete(c.conns, h)
	}
}

func (c *Client) conn(host string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[host]; ok {
		return conn, nil
	}
	// A server restarts on a new port and is announced as soon as it holds
	// its shard: reconnect quickly (gRPC's default first backoff is 1 s,
	// longer than a Get's retries last).
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6,
			Jitter: 0.2, MaxDelay: 2 * time.Second}, MinConnectTimeout: c.cfg.Timeout})}
	conn, err := grpc.NewClient(host, append(opts, c.cfg.DialOptions...)...)
	if err != nil {
		return nil, err
	}
	c.conns[host] = conn
	return conn, nil
}

// call sends one Get to host with the per-host timeout and learns the
// host's shard from the answer.
func (c *Client) call(ctx context.Context, host string, keys []string, withOffsets bool) (*servingv1.GetResponse, error) {
	conn, err := c.conn(host)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	// Wait for the connection within the timeout rather than fail at once
	// while it (re)connects: each request to a host has its own timeout and
	// retries (the seed's rule).
	req := &servingv1.GetRequest{Keys: keys, Table: c.cfg.Table, WithOffsets: withOffsets}
	resp, err := servingv1.NewCacheClient(conn).Get(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		// A server still loading names its shard: learnt, so that its
		// range is known before it answers (one holding none names an
		// empty range, not learnt over what the client knew).
		if sh := ShardOf(err); sh != nil && sh.Hi > sh.Lo {
			c.learn(host, sh)
		}
		return nil, err
	}
	c.learn(host, resp.Shard)
	return resp, nil
}

// learn keeps host's shard unless an older claim is reported.
func (c *Client) learn(host string, s *servingv1.Shard) {
	if s == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Table != "" && s.Table != c.cfg.Table {
		delete(c.shards, host)
		return
	}
	if old, ok := c.shards[host]; ok && old.Generation > s.Generation && old.Dc == s.Dc {
		return
	}
	c.shards[host] = s
	c.answered[host] = s
}

func (c *Client) forget(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.shards, host)
}

// Shards returns the shards the client knows, by host.
func (c *Client) Shards() map[string]*servingv1.Shard {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]*servingv1.Shard, len(c.shards))
	for h, s := range c.shards {
		out[h] = s
	}
	return out
}

// hedged returns the hosts of routes whose requests wait for the hedge: the
// other data centres' when the client's own holds every one of their keys.
func (c *Client) hedged(routes map[string][]string) map[string]bool {
	if c.cfg.DC == "" || c.cfg.Hedge < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	local := map[string]bool{} // keys a host of this data centre holds
	remote := []string{}
	for h, ks := range routes {
		if s := c.shards[h]; s != nil && s.Dc == c.cfg.DC {
			for _, k := range ks {
				local[k] = true
			}
		} else {
			remote = append(remote, h)
		}
	}
	out := map[string]bool{}
	for _, h := range remote {
		if !slices.ContainsFunc(routes[h], func(k string) bool { return !local[k] }) {
			out[h] = true
		}
	}
	return out
}

// route returns, per host, the keys of its shard, and the keys no known
// host holds.
func (c *Client) route(keys []string) (map[string][]string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hosts := make([]string, 0, len(c.shards))
	for h := range c.shards {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	out := map[string][]string{}
	var orphans []string
	for _, k := range keys {
		found := false
		for _, h := range hosts {
			if s := c.shards[h]; Holds(s, k) {
				out[h] = append(out[h], k)
				found = true
			}
		}
		if !found {
			orphans = append(orphans, k)
		}
	}
	return out, orphans
}

// noShard is ErrNoShard for orphans, naming the partitions nobody holds
// and what the servers known hold, so that the answer says which shard is
// missing and not only that time ran out (cause, if the wait was cut).
func (c *Client) noShard(orphans []string, cause error) error {
	c.mu.Lock()
	var held []string
	partitions, virtual := int32(0), int32(0)
	for _, h := range slices.Sorted(maps.Keys(c.answered)) {
		if sh := c.answered[h]; sh != nil && (sh.Partitions > 0 || sh.Virtual > 0) {
			partitions, virtual = sh.Partitions, sh.Virtual
			now := "holds"
			if _, ok := c.shards[h]; !ok {
				now = "held, when it last answered,"
			}
			held = append(held, fmt.Sprintf("%s %s %s", h, now, describe(sh)))
		}
	}
	c.mu.Unlock()
	var missing []string
	for _, k := range orphans[:min(len(orphans), 5)] {
		switch {
		case virtual > 0:
			missing = append(missing, fmt.Sprintf("%q (virtual shard %d of %d)", k, streams.Partition(k, virtual), virtual))
		case partitions > 0:
			missing = append(missing, fmt.Sprintf("%q (partition %d of %d)", k, streams.Partition(k, partitions), partitions))
		default:
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	if len(orphans) > 5 {
		missing = append(missing, fmt.Sprintf("and %d more", len(orphans)-5))
	}
	known := "no server answered yet"
	if len(held) > 0 {
		known = strings.Join(held, "; ")
	}
	err := fmt.Errorf("%w: keys %s; %s", ErrNoShard, strings.Join(missing, ", "), known)
	if cause != nil {
		err = fmt.Errorf("%w (waited until %w)", err, cause)
	}
	return err
}

// Get returns the values of keys (a key the table does not hold has no
// entry). It waits up to NoShardWait for shards of keys no known server
// holds, and fails only when some key has no shard or every replica of its
// shard failed.
func (c *Client) Get(ctx context.Context, keys []string) (map[string][]byte, error) {
	return c.get(ctx, keys, nil)
}

// errBehind is get's error when every key was answered, some only by
// replicas whose shard did not yet hold the records asked for.
var errBehind = errors.New("serving: the replicas' shards are behind the offsets asked for")

// GetAfter returns the values of keys once the table's copy that answers
// holds every record before after (per partition: the table's end offsets
// listed after a write, to read it back). It asks again every 10 ms while
// the answers reflect less, until ctx ends.
func (c *Client) GetAfter(ctx context.Context, keys []string, after map[int32]int64) (map[string][]byte, error) {
	if after == nil {
		after = map[int32]int64{}
	}
	for {
		values, err := c.get(ctx, keys, after)
		if !errors.Is(err, errBehind) {
			return values, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// get is Get; with after, an answer counts for a key only if its shard
// holds every record of the key's partition before after's offset.
func (c *Client) get(ctx context.Context, keys []string, after map[int32]int64) (map[string][]byte, error) {
	keys = dedupe(keys)
	if len(keys) == 0 {
		return map[string][]byte{}, nil
	}
	routes, orphans := c.route(keys)
	deadline := time.Now().Add(c.cfg.NoShardWait)
	for len(orphans) > 0 {
		c.mu.Lock()
		pinged, refused := c.pinged, c.refused
		c.mu.Unlock()
		if refused != nil {
			return nil, refused
		}
		if time.Now().After(deadline) {
			return nil, c.noShard(orphans, nil)
		}
		select {
		case <-ctx.Done():
			return nil, c.noShard(orphans, ctx.Err())
		case <-pinged:
		case <-time.After(c.cfg.PingPeriod):
		}
		routes, orphans = c.route(keys)
	}

	type answer struct {
		host string
		resp *servingv1.GetResponse
		err  error
	}
	answers := make(chan answer, len(routes))
	// Late answers only refresh the shard map: their requests outlive Get.
	bg := context.WithoutCancel(ctx)
	// The other data centres' replicas wait for the hedge, a local
	// failure, or the end of Get (then they are not asked at all).
	hedged := c.hedged(routes)
	failed, finished := make(chan struct{}), make(chan struct{})
	var failOnce sync.Once
	defer close(finished)
	for h, ks := range routes {
		go func() {
			if hedged[h] {
				t := time.NewTimer(c.cfg.Hedge)
				defer t.Stop()
				select {
				case <-t.C:
				case <-failed:
				case <-finished:
					return
				}
			}
			var resp *servingv1.GetResponse
			var err error
			for attempt := 0; attempt <= c.cfg.Retries; attempt++ {
				if resp, err = c.batched(bg, h, ks, after != nil); err == nil {
					break
				}
			}
			answers <- answer{h, resp, err}
		}()
	}
	out := make(map[string][]byte, len(keys))
	answered := make(map[string]bool, len(keys))
	var errs []error
	behind := false
	for pending := len(routes); pending > 0; pending-- {
		var a answer
		select {
		case a = <-answers:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if (a.err != nil || !a.resp.AllMatched) && !hedged[a.host] {
			failOnce.Do(func() { close(failed) })
		}
		switch {
		case a.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", a.host, a.err))
		case !a.resp.AllMatched:
			errs = append(errs, fmt.Errorf("%s: keys not in its shard (%s)", a.host, describe(a.resp.Shard)))
		default:
			for _, e := range a.resp.Entries {
				if answered[e.Key] {
					continue
				}
				if after != nil {
					if p := streams.Partition(e.Key, a.resp.Shard.Partitions); a.resp.NextOffsets[p] < after[p] {
						behind = true
						continue
					}
				}
				answered[e.Key] = true
				if e.Found {
					out[e.Key] = e.Value
				}
			}
		}
		if len(answered) == len(keys) {
			return out, nil
		}
	}
	var missing []string
	for _, k := range keys {
		if !answered[k] {
			missing = append(missing, k)
		}
	}
	if behind {
		return nil, fmt.Errorf("%w: %v", errBehind, missing)
	}
	return nil, fmt.Errorf("%w: %v: %w", ErrUnanswered, missing, errors.Join(errs...))
}

func dedupe(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
