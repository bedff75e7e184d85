package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type scopeKey struct{}

// WithScope returns ctx carrying the caller's scope.
func WithScope(ctx context.Context, s Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// FromContext returns the caller's scope. A context without one (a call
// that did not pass through an Authenticator) has a scope that allows
// nothing.
func FromContext(ctx context.Context) Scope {
	s, _ := ctx.Value(scopeKey{}).(Scope)
	return s
}

// Authenticator tells who a caller is. Made by On or Off.
type Authenticator struct {
	store *Store // nil: auth is off
}

// On returns an authenticator of the tokens in store.
func On(store *Store) *Authenticator { return &Authenticator{store: store} }

// Off returns an authenticator that takes every caller for an admin: for
// experiments only (--insecure). It says so in log, loudly.
func Off(log *slog.Logger) *Authenticator {
	log.Warn("AUTH IS OFF (--insecure): every caller of every HTTP and gRPC route may do everything, including reading and changing every seller's offers")
	return &Authenticator{}
}

// Enabled reports whether callers are authenticated.
func (a *Authenticator) Enabled() bool { return a.store != nil }

// Store returns the tokens the authenticator checks (nil when off).
func (a *Authenticator) Store() *Store { return a.store }

// Token returns the scope of a bearer credential, "Bearer <token>" (the
// form of HTTP's Authorization header and of gRPC's authorization
// metadata).
func (a *Authenticator) Token(credential string) (Scope, error) {
	if a.store == nil {
		return Scope{Kind: Admin, Insecure: true}, nil
	}
	if credential == "" {
		return Scope{}, fmt.Errorf("%w: no token: send Authorization: Bearer <token>", ErrUnauthenticated)
	}
	scheme, token, ok := strings.Cut(credential, " ")
	if ok && strings.EqualFold(scheme, "Basic") {
		// HTTP basic auth with the token as the password (any user name):
		// how Schema Registry clients (Confluent's serializers, kafka-ui,
		// @kafkajs/confluent-schema-registry) send credentials.
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
		_, password, found := strings.Cut(string(raw), ":")
		if err != nil || !found {
			return Scope{}, fmt.Errorf("%w: malformed basic credentials", ErrUnauthenticated)
		}
		token, scheme = password, "Bearer"
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Scope{}, fmt.Errorf("%w: want Authorization: Bearer <token> (or basic auth with the token as the password)", ErrUnauthenticated)
	}
	return a.store.Authenticate(strings.TrimSpace(token))
}

// Request returns r's context with the scope of its Authorization header.
func (a *Authenticator) Request(r *http.Request) (context.Context, error) {
	s, err := a.Token(r.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	return WithScope(r.Context(), s), nil
}

// Open reports whether a gRPC method is served without a token: the
// standard health and reflection services.
func Open(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.") || strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// Policy decides, before a gRPC method runs, whether a caller of scope
// sc may call it at all (the method may check more).
type Policy func(fullMethod string, sc Scope) error

// TableReaders is the policy of the serving cache, which serves whole
// tables: an admin token or a reader token.
func TableReaders(fullMethod string, sc Scope) error {
	if sc.Kind == Reader {
		return nil
	}
	return sc.CheckAdmin(fullMethod)
}

func (a *Authenticator) grpcContext(ctx context.Context, method string, policy Policy) (context.Context, error) {
	if Open(method) {
		return ctx, nil
	}
	var cred string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			cred = v[0]
		}
	}
	s, err := a.Token(cred)
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	if policy != nil {
		if err := policy(method, s); err != nil {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
	}
	return WithScope(ctx, s), nil
}

// GRPCOptions are the interceptors that authenticate every call but the
// Open ones, refuse those policy (if not nil) refuses, and put the
// caller's scope in its context; the methods check it further.
func (a *Authenticator) GRPCOptions(policy Policy) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := a.grpcContext(ctx, info.FullMethod, policy)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := a.grpcContext(ss.Context(), info.FullMethod, policy)
			if err != nil {
				return err
			}
			return h(srv, &scopedStream{ServerStream: ss, ctx: ctx})
		}),
	}
}

type scopedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *scopedStream) Context() context.Context { return s.ctx }

// Bearer returns gRPC per-call credentials that send token as
// "authorization: Bearer <token>" (over any transport: offerlog's own
// clients on a trusted network or TLS).
func Bearer(token string) grpc.CallOption {
	return grpc.PerRPCCredentials(bearer(token))
}

// BearerDial is Bearer for every call of a connection.
func BearerDial(token string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(bearer(token))
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
