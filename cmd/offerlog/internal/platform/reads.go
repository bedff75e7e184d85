package platform

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/api"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/zkconn"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Where the API reads offers and documents (Config.Reads).
const (
	// ReadsView keeps a view of the whole table in the process.
	ReadsView = "view"
	// ReadsCache asks the serving cache's servers of the table.
	ReadsCache = "cache"
)

func (p *process) readsCache() (bool, error) {
	switch p.cfg.Reads {
	case "", ReadsView:
		return false, nil
	case ReadsCache:
		return true, nil
	}
	return false, fmt.Errorf("reads: want %s or %s, got %q", ReadsView, ReadsCache, p.cfg.Reads)
}

// offerRecords returns where the offer API reads offers: a view of the
// whole offers-table, or the serving cache's servers of it; and, for the
// offers it no longer holds, offers.archive, read the same way.
func (p *process) offerRecords(ctx context.Context) (offerapi.Records, error) {
	cached, err := p.readsCache()
	if err != nil {
		return nil, err
	}
	var out [2]offerapi.Records
	for i, table := range []string{string(topics.OffersTable), string(topics.OffersArchive)} {
		if !cached {
			v, err := p.view(ctx, table, offers.TableCodec, "api-"+table, true)
			if err != nil {
				return nil, err
			}
			out[i] = offerapi.ViewRecords(v)
			continue
		}
		c, err := p.cacheClient(ctx, table)
		if err != nil {
			return nil, err
		}
		out[i] = offerapi.CacheRecords(c)
	}
	return offerapi.WithArchive(out[0], out[1]), nil
}

// documents returns where the HTTP API reads documents: the registry view
// of the process, or the serving cache's servers of registry-table.
func (p *process) documents(ctx context.Context) (api.Documents, error) {
	cached, err := p.readsCache()
	if err != nil {
		return nil, err
	}
	if !cached {
		return viewDocuments{v: p.registryView}, nil
	}
	c, err := p.cacheClient(ctx, string(topics.RegistryTable))
	if err != nil {
		return nil, err
	}
	return cacheDocuments{c: c, adm: p.adm}, nil
}

// zookeeper returns the process's ZooKeeper connection of the cache
// clients, dialled once.
func (p *process) zookeeper(ctx context.Context) (*zkConn, error) {
	p.zkOnce.Do(func() {
		conn, _, err := zkconn.Dial(ctx, p.cfg.ZooKeeper, 10*time.Second, p.log)
		if err != nil {
			p.zk.err = err
			return
		}
		p.closers = append(p.closers, conn.Close)
		p.zk.conn = conn
	})
	return &p.zk, p.zk.err
}

// cacheClient returns a client of the serving cache's servers of table
// (Config.CacheHosts, else those registered in ZooKeeper, else this
// process's cache), with the process's TLS trust and the cache token, run
// until the process stops.
func (p *process) cacheClient(ctx context.Context, table string) (*serving.Client, error) {
	cc := serving.ClientConfig{Table: table, DC: p.cfg.Cache.DC, Hedge: p.cfg.CacheHedge, Logger: p.log}
	switch {
	case len(p.cfg.CacheHosts) > 0:
		cc.Hosts = serving.StaticHosts(p.cfg.CacheHosts...)
	case p.cfg.ZooKeeper != "":
		zk, err := p.zookeeper(ctx)
		if err != nil {
			return nil, fmt.Errorf("reads through the cache: %w", err)
		}
		cc.Hosts = func(context.Context) ([]string, error) { return serving.Hosts(zk.conn, table) }
	case p.info.CacheAddr != "" && p.cfg.Cache.serves(table):
		cc.Hosts = serving.StaticHosts(p.info.CacheAddr)
	default:
		return nil, fmt.Errorf("reads through the cache: no server of %s is named (--cache-hosts or --zookeeper), and this process serves none "+
			"(--table %s,... serves it)", table, table)
	}
	if p.cfg.TLSCert != "" {
		ca := p.cfg.TLSCA
		if ca == "" {
			ca = p.cfg.TLSCert
		}
		t, err := streams.ClientTLS(ca)
		if err != nil {
			return nil, fmt.Errorf("reads through the cache: %w", err)
		}
		cc.DialOptions = append(cc.DialOptions, grpc.WithTransportCredentials(credentials.NewTLS(t)))
	}
	if p.auth.Enabled() {
		token := p.cfg.CacheToken
		if token == "" {
			data, err := os.ReadFile(filepath.Join(p.cfg.DataDir, AdminTokenFile))
			if err != nil {
				return nil, fmt.Errorf("reads through the cache need an admin token (--cache-token): %w", err)
			}
			token = strings.TrimSpace(string(data))
		}
		cc.DialOptions = append(cc.DialOptions, auth.BearerDial(token))
	}
	c := serving.NewClient(cc)
	p.sup.Go(ctx, "reads-"+table, false, func(ctx context.Context) error { return c.Run(ctx) })
	return c, nil
}

// zkConn is a ZooKeeper connection dialled once per process, or why not.
type zkConn struct {
	conn *zk.Conn
	err  error
}

// viewDocuments reads documents from the registry view of the process.
type viewDocuments struct{ v *registry.View }

func (d viewDocuments) Document(_ context.Context, key string) (*schemas.RegistryRecord, error) {
	if err := d.v.Fresh(); err != nil {
		return nil, err
	}
	return d.v.Get(key)
}

func (d viewDocuments) DocumentSynced(ctx context.Context, key string) (*schemas.RegistryRecord, error) {
	if err := d.v.Sync(ctx); err != nil {
		return nil, err
	}
	return d.v.Get(key)
}

// cacheDocuments reads documents through the serving cache's servers of
// registry-table.
type cacheDocuments struct {
	c   *serving.Client
	adm *kadm.Client
}

func (d cacheDocuments) Document(ctx context.Context, key string) (*schemas.RegistryRecord, error) {
	values, err := d.c.Get(ctx, []string{key})
	if err != nil {
		return nil, err
	}
	return decodeDocument(key, values)
}

// DocumentSynced reads key once the answering shard holds every record of
// registry-table written before the call (its end offsets, listed now).
func (d cacheDocuments) DocumentSynced(ctx context.Context, key string) (*schemas.RegistryRecord, error) {
	ends, err := streams.EndOffsets(ctx, d.adm, string(topics.RegistryTable))
	if err != nil {
		return nil, err
	}
	values, err := d.c.GetAfter(ctx, []string{key}, ends)
	if err != nil {
		return nil, err
	}
	return decodeDocument(key, values)
}

func decodeDocument(key string, values map[string][]byte) (*schemas.RegistryRecord, error) {
	data, ok := values[key]
	if !ok {
		return nil, nil
	}
	v, err := registry.TableCodec.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("the cache's record of %s: %w", key, err)
	}
	rec, _ := v.(*schemas.RegistryRecord)
	return rec, nil
}
