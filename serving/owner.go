package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/offerlog/offerlog/internal/zkconn"
)

// Owner decides which shard a server holds in its data centre.
type Owner interface {
	// Claim blocks until the server holds a shard, and returns its index,
	// a generation that grows with every claim of the data centre, and a
	// channel closed the moment the shard may no longer be the server's.
	Claim(ctx context.Context) (shard int, generation int64, lost <-chan struct{}, err error)
	// Close gives the shard up.
	Close()
}

// Static holds one shard for good: right only where nobody else can claim
// it (offerlog dev, benchmarks).
type Static struct{ Shard int }

// Claim returns the static shard; it is never lost.
func (s Static) Claim(context.Context) (int, int64, <-chan struct{}, error) {
	return s.Shard, 0, nil, nil
}

// Close does nothing.
func (Static) Close() {}

// ZooKeeper holds shards in ZooKeeper under /offerlog/serving/<table>/<dc>,
// whose data is the data centre's shard count (DialOwner checks it):
// shards/<i> is an ephemeral node of the host holding shard i (at most one
// per data centre); hosts/<host> remembers the shard a host held last, which
// it takes back first; members/<host> is an ephemeral node with the host's
// gRPC address, for clients to find it; running/<host> an ephemeral node of
// every server up, serving or not. A session that is lost, or only
// disconnected, loses the shard at once (the server stops answering); a
// session that comes back still owning its node keeps the shard.
type ZooKeeper struct {
	conn   *zk.Conn
	root   string
	host   string
	addr   string
	shards int
	// growing: shards are hash ranges (ServerConfig.Virtual), whose nodes
	// are named by the count (shards/<count>-<i>), so that servers of
	// several counts run at once while a data centre grows.
	growing bool
	log     *slog.Logger

	mu        sync.Mutex
	connected bool
	closing   bool
	lost      chan struct{}
	change    chan struct{} // closed and replaced on every session change
}

// Root returns the ZooKeeper path of a table's serving nodes.
func Root(table string) string { return "/offerlog/serving/" + table }

// DialOwner connects to ZooKeeper and returns the owner of host (serving
// addr) among shards shards of table in dc, cut by ranges of partitions: a
// data centre runs one count at a time (see count).
func DialOwner(ctx context.Context, servers, table, dc, host, addr string, shards int, log *slog.Logger) (*ZooKeeper, error) {
	return dialOwner(ctx, servers, table, dc, host, addr, shards, false, log)
}

// DialHashOwner is DialOwner for a table cut by hash ranges
// (ServerConfig.Virtual): servers of several counts may run in a data
// centre at once, each answering the keys of its range, so that it grows
// (or shrinks) by starting the servers of the new count, then stopping
// the old ones once the new are loaded: every key is answered throughout.
func DialHashOwner(ctx context.Context, servers, table, dc, host, addr string, shards int, log *slog.Logger) (*ZooKeeper, error) {
	return dialOwner(ctx, servers, table, dc, host, addr, shards, true, log)
}

func dialOwner(ctx context.Context, servers, table, dc, host, addr string, shards int, growing bool, log *slog.Logger) (*ZooKeeper, error) {
	if log == nil {
		log = slog.Default()
	}
	conn, events, err := zkconn.Dial(ctx, servers, 4*time.Second, log)
	if err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	z := &ZooKeeper{conn: conn, root: path.Join(Root(table), dc), host: host, addr: addr, shards: shards, growing: growing, log: log,
		connected: true, change: make(chan struct{})}
	go z.watch(events)
	for _, p := range []string{"/offerlog", "/offerlog/serving", Root(table), z.root, z.root + "/shards", z.root + "/hosts", z.root + "/members", z.root + "/running"} {
		if _, err := conn.Create(p, nil, 0, zkconn.ACL()); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			conn.Close()
			return nil, fmt.Errorf("serving: create %s: %w", p, err)
		}
	}
	if err := z.count(dc); err != nil {
		conn.Close()
		return nil, err
	}
	return z, nil
}

// count checks the data centre's recorded shard count against the
// server's, under the running/<host> node it creates: a data centre is
// resharded by stopping every one of its servers and starting them with
// the new count (the other data centres answer meanwhile); a server with
// another count than the running ones' is refused.
func (z *ZooKeeper) count(dc string) error {
	if _, err := z.conn.Create(z.root+"/running/"+z.host, nil, zk.FlagEphemeral, zkconn.ACL()); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("serving: register %s as running: %w", z.host, err)
	}
	for {
		data, st, err := z.conn.Get(z.root)
		if err != nil {
			return fmt.Errorf("serving: read the shard count of %s: %w", dc, err)
		}
		recorded, _ := strconv.Atoi(string(data))
		if recorded == z.shards {
			return nil
		}
		if recorded > 0 && z.growing {
			// Hash ranges of several counts answer side by side: the
			// count recorded is the newest started.
			z.log.Info("serving: data centre growing", "dc", dc, "from", recorded, "to", z.shards)
		} else if recorded > 0 {
			running, _, err := z.conn.Children(z.root + "/running")
			if err != nil {
				return fmt.Errorf("serving: list the running servers of %s: %w", dc, err)
			}
			others := slices.DeleteFunc(running, func(h string) bool { return h == z.host })
			if len(others) > 0 {
				return fmt.Errorf("serving: data centre %s is cut into %d shards, and %d of its servers run (%s): to cut it into %d, stop every one of them, then start them with --shards %d",
					dc, recorded, len(others), strings.Join(others, ", "), z.shards, z.shards)
			}
			z.log.Warn("serving: data centre resharded", "dc", dc, "from", recorded, "to", z.shards)
		}
		_, err = z.conn.Set(z.root, []byte(strconv.Itoa(z.shards)), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue // another server recorded a count meanwhile
		}
		if err != nil {
			return fmt.Errorf("serving: record the shard count of %s: %w", dc, err)
		}
		return nil
	}
}

// Shards returns the shard count recorded for each data centre of table.
func Shards(conn *zk.Conn, table string) (map[string]int, error) {
	dcs, _, err := conn.Children(Root(table))
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return map[string]int{}, nil
		}
		return nil, err
	}
	out := map[string]int{}
	for _, dc := range dcs {
		data, _, err := conn.Get(path.Join(Root(table), dc))
		if err != nil {
			return nil, err
		}
		if n, err := strconv.Atoi(string(data)); err == nil {
			out[dc] = n
		}
	}
	return out, nil
}

// watch follows the session: anything but an established session loses the
// shard.
func (z *ZooKeeper) watch(events <-chan zk.Event) {
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		z.mu.Lock()
		up := ev.State == zk.StateHasSession
		if z.connected && !up && z.lost != nil {
			close(z.lost)
			z.lost = nil
			if !z.closing {
				z.log.Warn("serving: ZooKeeper session lost, shard given up", "state", ev.State.String())
			}
		}
		z.connected = up
		close(z.change)
		z.change = make(chan struct{})
		z.mu.Unlock()
	}
}

// Claim takes the host's previous shard if it is free, else the first free
// one, and waits for one to free up when none is.
func (z *ZooKeeper) Claim(ctx context.Context) (int, int64, <-chan struct{}, error) {
	for {
		z.mu.Lock()
		up, change := z.connected, z.change
		z.mu.Unlock()
		if !up {
			select {
			case <-change:
				continue
			case <-ctx.Done():
				return 0, 0, nil, ctx.Err()
			}
		}
		if err := z.member(); err != nil {
			z.log.Warn("serving: register member", "err", err)
		}
		order := make([]int, 0, z.shards)
		if data, _, err := z.conn.Get(z.root + "/hosts/" + z.host); err == nil {
			if prev, ok := z.index(string(data)); ok {
				order = append(order, prev)
			}
		}
		for i := range z.shards {
			if len(order) == 0 || i != order[0] {
				order = append(order, i)
			}
		}
		for _, i := range order {
			gen, ok, err := z.take(i)
			if err != nil {
				z.log.Warn("serving: claim", "shard", i, "err", err)
				continue
			}
			if ok {
				return i, gen, z.holding(), nil
			}
		}
		_, _, watch, err := z.conn.ChildrenW(z.root + "/shards")
		if err != nil {
			watch = nil
		}
		select {
		case <-watch:
		case <-change:
		case <-time.After(time.Second):
		case <-ctx.Done():
			return 0, 0, nil, ctx.Err()
		}
	}
}

// node names shard i's node (and what hosts/<host> remembers): i, or
// <count>-<i> for a growing (hash-range) owner.
func (z *ZooKeeper) node(i int) string {
	if z.growing {
		return strconv.Itoa(z.shards) + "-" + strconv.Itoa(i)
	}
	return strconv.Itoa(i)
}

// index returns the shard a node name names, if it is one of this owner's.
func (z *ZooKeeper) index(name string) (int, bool) {
	if z.growing {
		count, i, ok := strings.Cut(name, "-")
		if !ok || count != strconv.Itoa(z.shards) {
			return 0, false
		}
		name = i
	}
	i, err := strconv.Atoi(name)
	return i, err == nil && i >= 0 && i < z.shards
}

// take creates shard i's node, or finds it already the session's own.
func (z *ZooKeeper) take(i int) (int64, bool, error) {
	p := z.root + "/shards/" + z.node(i)
	_, err := z.conn.Create(p, []byte(z.host+"\n"+z.addr), zk.FlagEphemeral, zkconn.ACL())
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return 0, false, err
	}
	_, st, err := z.conn.Get(p)
	if err != nil {
		return 0, false, err
	}
	if st.EphemeralOwner != z.conn.SessionID() {
		return 0, false, nil
	}
	hp := z.root + "/hosts/" + z.host
	if _, err := z.conn.Set(hp, []byte(z.node(i)), -1); errors.Is(err, zk.ErrNoNode) {
		_, err = z.conn.Create(hp, []byte(z.node(i)), 0, zkconn.ACL())
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return 0, false, err
		}
	}
	return st.Czxid, true, nil
}

func (z *ZooKeeper) member() error {
	_, err := z.conn.Create(z.root+"/members/"+z.host, []byte(z.addr), zk.FlagEphemeral, zkconn.ACL())
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

func (z *ZooKeeper) holding() <-chan struct{} {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.lost = make(chan struct{})
	if !z.connected {
		close(z.lost)
		z.lost = nil
		return closed
	}
	return z.lost
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Close closes the session: the shard's node goes at once.
func (z *ZooKeeper) Close() {
	z.mu.Lock()
	z.closing = true
	z.mu.Unlock()
	z.conn.Close()
}

// Hosts returns the gRPC addresses of every member of table, in every data
// centre, as registered in ZooKeeper.
func Hosts(conn *zk.Conn, table string) ([]string, error) {
	dcs, _, err := conn.Children(Root(table))
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, dc := range dcs {
		members, _, err := conn.Children(path.Join(Root(table), dc, "members"))
		if err != nil {
			continue
		}
		for _, m := range members {
			if data, _, err := conn.Get(path.Join(Root(table), dc, "members", m)); err == nil {
				out = append(out, string(data))
			}
		}
	}
	return out, nil
}
