// Package listener serves offerlog's HTTP and gRPC listeners with bounds:
// at most a number of connections at once, timeouts on slow clients, and
// requests that could be read two ways (request smuggling) refused. What a
// hostile or broken client sends costs its own connection, never another
// client's.
package listener

import (
	"crypto/tls"
	"net"
	"net/http"
	"runtime"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// Limits bound a listener. The zero value of a field takes its default.
type Limits struct {
	// MaxConns is how many connections are served at once (default
	// 1024). Over it, HTTP closes the connection idle the longest; gRPC,
	// and HTTP when every connection is in a request, leave more waiting
	// in the kernel's accept queue.
	MaxConns int
	// ReadTimeout bounds reading a whole request, body included: a client
	// that sends slowly is cut off after it (default 30 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the
	// end of its answer (default 2 min: answers may wait for a verdict).
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request
	// (default 2 min).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB).
	MaxHeaderBytes int
	// MaxMessageBytes bounds one gRPC message (default 4 MiB).
	MaxMessageBytes int
	// MaxStreams bounds concurrent gRPC streams per connection (default 256).
	MaxStreams uint32
	// TLS, if set, serves HTTP and gRPC over TLS only.
	TLS *tls.Config
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{MaxConns: 1024, ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Minute,
	IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, MaxMessageBytes: 4 << 20, MaxStreams: 256}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = d.ReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = d.MaxMessageBytes
	}
	if l.MaxStreams == 0 {
		l.MaxStreams = d.MaxStreams
	}
	return l
}

// Bound returns ln serving at most l.MaxConns connections at once.
func (l Limits) Bound(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, l.withDefaults().MaxConns)
}

// HTTPServer returns a server of h with l's timeouts and header bound, for
// a listener made by HTTPListener: a request with both Content-Length and
// Transfer-Encoding is answered 400 and its connection closed.
func (l Limits) HTTPServer(h http.Handler) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           refuseSmuggling(h),
		ReadHeaderTimeout: min(10*time.Second, l.ReadTimeout),
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnContext:       connContext,
		ConnState:         connState,
	}
}

// HTTPListener returns ln bounded to l.MaxConns connections, the idlest
// closed to make room for a new one (shedListener), whose connections
// watch for requests framed twice (see HTTPServer).
func (l Limits) HTTPListener(ln net.Listener) net.Listener {
	ln = newShedListener(ln, l.withDefaults().MaxConns)
	if l.TLS != nil {
		// The watch reads what the TLS connection decrypts.
		ln = tls.NewListener(ln, l.TLS)
	}
	return &watchedListener{Listener: ln}
}

// GRPCOptions are the server options of l: message size, concurrent
// streams, and keepalive enforcement (a client may ping at most every
// 10 s; a connection idle for IdleTimeout is closed).
func (l Limits) GRPCOptions() []grpc.ServerOption {
	l = l.withDefaults()
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(l.MaxMessageBytes),
		grpc.MaxConcurrentStreams(l.MaxStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: l.IdleTimeout, Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.ConnectionTimeout(min(10*time.Second, l.ReadTimeout)),
		// Streams are served by a pool of goroutines (a new one only when
		// all are busy) instead of a goroutine per stream, whose stack
		// grew anew for every call.
		grpc.NumStreamWorkers(uint32(4 * runtime.GOMAXPROCS(0))),
	}
	if l.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(l.TLS)))
	}
	return opts
}

// GRPCServer returns a gRPC server with l's bounds and extra options, with
// the standard health service (every service SERVING: readiness is the
// HTTP /readyz) and server reflection registered, so that grpcurl and
// grpc_health_probe work without proto files.
func (l Limits) GRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append(l.GRPCOptions(), extra...)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	return g
}
