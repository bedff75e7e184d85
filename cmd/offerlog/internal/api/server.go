package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/internal/metrics"
	"github.com/offerlog/offerlog/processors/numerator"
	"github.com/offerlog/offerlog/processors/numerator/sharding"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/documentv1"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// Config of the API.
type Config struct {
	// Producer appends epochs and documents; it must be configured with
	// acks=all. The API does not close it.
	Producer *kgo.Client
	// Cluster is the cluster the producer writes to: its admin client
	// and the console's reads.
	Cluster *streams.Cluster
	// Epochs is the catalogue documents are checked against; the caller
	// keeps it following the epochs topic.
	Epochs *registry.Catalogue
	// Compatibilities are the schema registry API's levels, which the
	// caller keeps following schemas.registered (nil: the server's own).
	Compatibilities *schemas.Compatibilities
	// Registry answers reads of the registry (a view of its table, or the
	// serving cache); nil disables them (503).
	Registry Documents
	// Verdicts matches verdicts to waiting posts; nil disables ?wait=true.
	Verdicts *streams.Replies[schemas.Verdict]
	// Partitions and Replication of the client topics created on a
	// client's first epoch.
	Partitions  int32
	Replication int16
	// Rules are the registry's rules (document size limit, expiry).
	Rules registry.Rules
	// WaitTimeout bounds ?wait=true.
	WaitTimeout time.Duration
	Metrics     *metrics.Registry
	Logger      *slog.Logger
	// Offers serves the offer API's routes; nil answers them 503.
	Offers *offerapi.Service
	// Search serves the search routes: the searcher of this process; nil
	// answers them 503 (the searcher runs elsewhere).
	Search Searcher
	// Ready reports whether every component the API relies on is ready.
	Ready func() error
	// Auth tells who a caller is (auth.On), or takes every caller for an
	// admin (auth.Off); required.
	Auth *auth.Authenticator
}

// Documents reads the registry's records of documents, by key
// ("client/pk").
type Documents interface {
	// Document returns the record of key, nil if the registry holds none,
	// as the reader's copy of the table shows it now.
	Document(ctx context.Context, key string) (*schemas.RegistryRecord, error)
	// DocumentSynced returns it once the copy shows every change the
	// registry wrote before the call: a writer given a verdict reads its
	// document.
	DocumentSynced(ctx context.Context, key string) (*schemas.RegistryRecord, error)
}

// Server is the HTTP API. It is an http.Handler, safe for concurrent use.
type Server struct {
	cfg      Config
	compat   *schemas.Compatibilities
	adm      *kadm.Client
	mux      *http.ServeMux
	requests *metrics.CounterVec
	latency  *metrics.HistogramVec
	hops     *metrics.HistogramVec
	// patterns are the routes served, as "METHOD /path".
	patterns []string
}

// New returns the API server.
func New(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Producer == nil || cfg.Cluster == nil {
		errs = append(errs, errors.New("api: no producer or no cluster"))
	}
	if cfg.Epochs == nil {
		errs = append(errs, errors.New("api: no epoch catalogue"))
	}
	if cfg.Partitions < 1 {
		errs = append(errs, fmt.Errorf("api: %d partitions", cfg.Partitions))
	}
	if cfg.Auth == nil {
		errs = append(errs, errors.New("api: no authenticator (auth.On or auth.Off)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Compatibilities == nil {
		cfg.Compatibilities = &schemas.Compatibilities{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, compat: cfg.Compatibilities, adm: cfg.Cluster.Admin(), mux: http.NewServeMux(),
		requests: cfg.Metrics.Counter("offerlog_http_requests_total", "HTTP requests by route and status.", "route", "status"),
		latency:  cfg.Metrics.Histogram("offerlog_http_request_seconds", "HTTP request latency.", metrics.LatencyBuckets, "route"),
		hops:     cfg.Metrics.WriteHops(),
	}
	s.route("PUT /v1/clients/{client}/epochs/{epoch}", clientPath, s.putEpoch)
	s.route("GET /v1/clients/{client}/epochs", clientPath, s.listEpochs)
	s.route("POST /v1/clients/{client}/documents", clientPath, s.postDocument)
	s.route("GET /v1/clients/{client}/documents/{pk}", clientPath, s.getDocument)
	s.route("GET /v1/clients/{client}/verdicts/{partition}/{offset}", clientPath, s.getVerdict)
	s.route("POST /v1/clients/{client}/search", clientPath, s.postSearch)
	s.route("GET /v1/clients/{client}/search", clientPath, s.getSearch)
	s.route("GET /v1/numerator/check", anyToken, s.numeratorCheck)
	s.route("GET /v1/numerator/states", anyToken, s.numeratorStates)
	s.route("GET /v1/numerator/shard", anyToken, s.numeratorShard)
	s.route("GET /v1/numerator/states/{version}/keys/{business_id}/{offer_id}/{shop_id}/{warehouse_id}", anyToken, s.numeratorLookup)
	s.routeOffers()
	s.routeSchemaRegistry()
	s.routeConsole()
	s.route("GET /healthz", public, func(w http.ResponseWriter, _ *http.Request) {
		// Written as is: a probe's answer costs no encoding.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(healthy)
	})
	s.route("GET /readyz", public, s.ready)
	s.mux.Handle("GET /metrics", cfg.Metrics.Handler())
	s.patterns = append(s.patterns, "GET /metrics")
	if err := s.serveOpenAPI(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// No route: the mux answers 404, or 405 with Allow, in plain text;
	// answer its status as every other error, in JSON.
	rec := &unmatched{header: http.Header{}}
	s.mux.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	status := rec.status
	if status == 0 || status == http.StatusOK {
		status = http.StatusNotFound
	}
	msg := fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)
	if status == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))
	}
	writeJSON(w, status, Error{Error: msg})
}

// unmatched records the mux's answer to a request no route takes.
type unmatched struct {
	header http.Header
	status int
}

func (u *unmatched) Header() http.Header         { return u.header }
func (u *unmatched) Write(b []byte) (int, error) { return len(b), nil }
func (u *unmatched) WriteHeader(status int)      { u.status = status }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// access decides whether the caller of r, of scope sc, may call its route.
type access func(r *http.Request, sc auth.Scope) error

var (
	// public routes are served without a token: the probes, the metrics
	// and the API's description (/openapi.json, no data).
	public access
	// anyToken routes take any valid token; what it may touch is checked
	// further in (the offer service checks the seller).
	anyToken access = func(*http.Request, auth.Scope) error { return nil }
	// adminOnly routes need an admin token.
	adminOnly access = func(r *http.Request, sc auth.Scope) error { return sc.CheckAdmin(r.Method + " " + r.URL.Path) }
	// clientPath routes act for the {client} of their path.
	clientPath access = func(r *http.Request, sc auth.Scope) error { return sc.Check(auth.Client, r.PathValue("client")) }
	// sellerPath routes act for the {seller} of their path.
	sellerPath access = func(r *http.Request, sc auth.Scope) error { return sc.Check(auth.Seller, r.PathValue("seller")) }
)

// healthy is /healthz's answer.
var healthy = []byte(`{"status":"ok"}` + "\n")

// route serves pattern with h for callers need lets in: a caller without
// a valid token is answered 401, one outside its scope 403.
func (s *Server) route(pattern string, need access, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	// The route's series, looked up once (a label lookup joins the labels
	// and takes the family's lock: twice a request was the most of what a
	// health check cost beyond a trivial handler's).
	latency := s.latency.With(pattern)
	var byStatus sync.Map // status -> *metrics.Counter
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if err := s.authorize(&r, need); err != nil {
			authError(sw, err)
		} else {
			h(sw, r)
		}
		c, ok := byStatus.Load(sw.status)
		if !ok {
			c, _ = byStatus.LoadOrStore(sw.status, s.requests.With(pattern, strconv.Itoa(sw.status)))
		}
		c.(*metrics.Counter).Inc()
		latency.Observe(time.Since(start).Seconds())
	})
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
	// Field names the part of the request at fault, if one is.
	Field string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// Every 503 is a moment's: a component starting, a bound reached.
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authorize authenticates *r's caller for a route that needs need (none
// for a public route) and puts its scope in *r's context.
func (s *Server) authorize(r **http.Request, need access) error {
	if need == nil {
		return nil
	}
	ctx, err := s.cfg.Auth.Request(*r)
	if err != nil {
		return err
	}
	*r = (*r).WithContext(ctx)
	return need(*r, auth.FromContext(ctx))
}

// authError answers a refused caller: 401 for no valid token, 403 for
// one outside its scope.
func authError(w http.ResponseWriter, err error) {
	if errors.Is(err, auth.ErrForbidden) {
		writeError(w, http.StatusForbidden, err)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="offerlog"`)
	writeError(w, http.StatusUnauthorized, err)
}

func writeError(w http.ResponseWriter, status int, err error) {
	var fe *FieldError
	if errors.As(err, &fe) {
		writeJSON(w, status, Error{Error: fe.Reason, Field: fe.Field})
		return
	}
	writeJSON(w, status, Error{Error: err.Error()})
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// validClient answers a malformed client name 422, naming the field, and
// reports whether the name is well formed.
func validClient(w http.ResponseWriter, client string) bool {
	if err := topics.ValidateClient(client); err != nil {
		writeError(w, http.StatusUnprocessableEntity, &FieldError{Field: "client", Reason: err.Error()})
		return false
	}
	return true
}

// jsonError says what encoding/json found wrong in a body in the body's
// terms (a member, a JSON type, a byte offset), not Go's (struct fields,
// Go types): a FieldError where a member is at fault.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return fieldErr(field, "want %s, got a JSON %s", jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("malformed JSON at byte %d", syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("malformed JSON: the body ends inside a value")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return fieldErr(name, "unknown member")
	}
	return errors.New("malformed JSON")
}

// jsonKind names a Go type as the JSON value it decodes.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return "another JSON value"
}

// errEmptyBody is decodeBody's error for a body with no JSON value.
var errEmptyBody = errors.New("malformed JSON: empty body")

// decodeBody decodes a JSON body strictly, limited to limit bytes.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) (int, error) {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return http.StatusBadRequest, errEmptyBody
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("body is larger than %d bytes", limit)
		}
		return http.StatusBadRequest, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return http.StatusBadRequest, errors.New("malformed JSON: trailing data after the object")
	}
	return 0, nil
}

func (s *Server) putEpoch(w http.ResponseWriter, r *http.Request) {
	client := r.PathValue("client")
	if !validClient(w, client) {
		return
	}
	epoch, err := strconv.ParseInt(r.PathValue("epoch"), 10, 64)
	if err != nil || epoch < 0 {
		writeError(w, http.StatusBadRequest, fieldErr("epoch", "want a non-negative integer, got %q", r.PathValue("epoch")))
		return
	}
	var body EpochJSON
	if status, err := decodeBody(w, r, 1<<20, &body); err != nil {
		writeError(w, status, err)
		return
	}
	if fe := validateEpoch(&body); fe != nil {
		writeError(w, http.StatusUnprocessableEntity, fe)
		return
	}
	if body.Embeddings == nil {
		body.Embeddings = []schemas.EmbeddingSpec{}
	}
	sch := &schemas.EpochSchema{Client: client, Epoch: epoch, Fields: body.Fields, Embeddings: body.Embeddings, Analyzer: body.Analyzer,
		RegisteredAt: time.Now().UTC().Truncate(time.Millisecond)}
	ctx := r.Context()
	if err := s.cfg.Epochs.Sync(ctx, s.adm); err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("read the epoch catalogue: %w", err))
		return
	}
	old, err := s.cfg.Epochs.Check(sch)
	switch {
	case err != nil:
		writeError(w, http.StatusConflict, err)
		return
	case old != nil:
		writeJSON(w, http.StatusOK, old)
		return
	}
	if newest, ok := s.newestEpoch(client); ok && newest > epoch {
		writeError(w, http.StatusConflict, fmt.Errorf("epoch %d is older than the client's newest epoch %d", epoch, newest))
		return
	}
	if _, err := topics.Ensure(ctx, s.adm, s.cfg.Replication, topics.ForClient(client, s.cfg.Partitions)); err != nil && !errors.Is(err, topics.ErrMismatch) {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("create the client's topics: %w", err))
		return
	}
	data, err := schemas.EpochSchemas.Encode(sch)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	key := fmt.Sprintf("%s/%d", client, epoch)
	if err := s.cfg.Producer.ProduceSync(ctx, &kgo.Record{Topic: topics.Epochs, Key: []byte(key), Value: data}).FirstErr(); err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("append the epoch: %w", err))
		return
	}
	// Answer once this instance's catalogue has it, so a document posted
	// right after is checked against it.
	if err := s.cfg.Epochs.Sync(ctx, s.adm); err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("read the epoch back: %w", err))
		return
	}
	s.cfg.Logger.Info("epoch registered", "client", client, "epoch", epoch)
	writeJSON(w, http.StatusCreated, sch)
}

func (s *Server) newestEpoch(client string) (int64, bool) {
	list := s.cfg.Epochs.List(client)
	if len(list) == 0 {
		return 0, false
	}
	return list[len(list)-1].Epoch, true
}

func (s *Server) listEpochs(w http.ResponseWriter, r *http.Request) {
	client := r.PathValue("client")
	if !validClient(w, client) {
		return
	}
	out := s.cfg.Epochs.List(client)
	if len(out) == 0 {
		writeError(w, http.StatusNotFound, fmt.Errorf("client %q has no epochs", client))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// PostResult answers a posted document.
type PostResult struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Verdict   string `json:"verdict,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

func (s *Server) postDocument(w http.ResponseWriter, r *http.Request) {
	client := r.PathValue("client")
	if !validClient(w, client) {
		return
	}
	// The seed's acknowledgement is the verdict (indexing.md: an ACK only
	// after validation and commit): a post waits for it unless it asks
	// ?async=true (202 once appended). ?wait=true, the old spelling of
	// the default, is still accepted; ?wait=false means async.
	q := r.URL.Query()
	async, ok := asyncParam(w, q)
	if !ok {
		return
	}
	sub := submission{client: client, async: async}
	switch p := q.Get("priority"); p {
	case "", "normal":
	case topics.PriorityUrgent:
		sub.urgent = true
	default:
		writeError(w, http.StatusBadRequest, fieldErr("priority", "%q is neither normal nor urgent", p))
		return
	}
	var fe *FieldError
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == ContentTypeProtobuf {
		// indexing.md's RawDocument, converted here once.
		r.Body = http.MaxBytesReader(w, r.Body, int64(4*s.cfg.Rules.MaxDocumentBytes))
		data, err := io.ReadAll(r.Body)
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("body is larger than %d bytes", tooBig.Limit))
			return
		} else if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("read the body: %w", err))
			return
		}
		var pb documentv1.RawDocument
		if err := proto.Unmarshal(data, &pb); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("not a protobuf RawDocument (offerlog.document.v1): %v", err))
			return
		}
		sub.doc, fe = fromProto(&pb)
	} else {
		var body DocumentJSON
		// JSON is larger than the Avro it becomes; the document limit is
		// enforced on the encoded document.
		if status, err := decodeBody(w, r, int64(4*s.cfg.Rules.MaxDocumentBytes), &body); err != nil {
			writeError(w, status, err)
			return
		}
		if body.Epoch == nil {
			writeError(w, http.StatusBadRequest, fieldErr("epoch", "required"))
			return
		}
		sch, ok := s.epoch(r.Context(), client, *body.Epoch)
		if !ok {
			writeError(w, http.StatusUnprocessableEntity, fieldErr("epoch", "client %q has no epoch %d", client, *body.Epoch))
			return
		}
		sub.doc, fe = toRawDocument(&body, sch)
	}
	if fe != nil {
		writeError(w, http.StatusUnprocessableEntity, fe)
		return
	}
	res, status, err := s.submit(r.Context(), sub)
	switch {
	case err == nil:
		writeJSON(w, status, res)
	case res.Offset >= 0 && status >= 500:
		// The document is appended; only its verdict is missing.
		writeJSON(w, status, struct {
			PostResult
			Error string `json:"error"`
		}{res, err.Error()})
	default:
		writeError(w, status, err)
	}
}

// ContentTypeProtobuf is the content type of a RawDocument in protobuf.
const ContentTypeProtobuf = "application/x-protobuf"

// submission is a document on its way in, in the one form every edge
// (JSON, protobuf over HTTP, gRPC) converts it to.
type submission struct {
	client        string
	doc           *schemas.RawDocument
	async, urgent bool
}

// epoch returns the schema of client's epoch e, catching the catalogue up
// once if it does not know it.
func (s *Server) epoch(ctx context.Context, client string, e int64) (*schemas.EpochSchema, bool) {
	sch, ok := s.cfg.Epochs.Get(client, e)
	if !ok {
		if err := s.cfg.Epochs.Sync(ctx, s.adm); err == nil {
			sch, ok = s.cfg.Epochs.Get(client, e)
		}
	}
	return sch, ok
}

// submit validates sub's document, appends it and, unless async, waits for
// its verdict. It returns the answer and its HTTP status; an error with
// the status to answer (res.Offset is -1 when nothing was appended).
func (s *Server) submit(ctx context.Context, sub submission) (PostResult, int, error) {
	res := PostResult{Partition: -1, Offset: -1}
	if !sub.async && s.cfg.Verdicts == nil {
		return res, http.StatusNotImplemented, errors.New("this instance does not wait for verdicts: post with ?async=true")
	}
	doc := sub.doc
	sch, ok := s.epoch(ctx, sub.client, doc.Epoch)
	if !ok {
		return res, http.StatusUnprocessableEntity, fieldErr("epoch", "client %q has no epoch %d", sub.client, doc.Epoch)
	}
	if err := schemas.CheckKey(doc.PK); err != nil {
		return res, http.StatusUnprocessableEntity, fieldErr("pk", "%v", err)
	}
	if err := registry.ValidateShape(doc); err != nil {
		return res, http.StatusUnprocessableEntity, err
	}
	if doc.Action == schemas.ActionUpsert {
		if err := registry.Validate(doc, sch); err != nil {
			return res, http.StatusUnprocessableEntity, err
		}
	}
	data, err := schemas.RawDocuments.Encode(doc)
	if err != nil {
		return res, http.StatusInternalServerError, err
	}
	if len(data) > s.cfg.Rules.MaxDocumentBytes {
		return res, http.StatusRequestEntityTooLarge, fmt.Errorf("document is %d bytes, more than the limit of %d", len(data), s.cfg.Rules.MaxDocumentBytes)
	}
	rec := &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte(sub.client + "/" + doc.PK), Value: data}
	if sub.urgent {
		rec.Headers = []kgo.RecordHeader{{Key: topics.PriorityHeader, Value: []byte(topics.PriorityUrgent)}}
	}
	appended := time.Now()
	if err := s.cfg.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return res, http.StatusServiceUnavailable, fmt.Errorf("append the document: %w", err)
	}
	s.hops.With("document", "append").Observe(time.Since(appended).Seconds())
	res = PostResult{Partition: rec.Partition, Offset: rec.Offset}
	if sub.async {
		return res, http.StatusAccepted, nil
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WaitTimeout)
	defer cancel()
	waited := time.Now()
	v, err := s.cfg.Verdicts.Wait(wctx, streams.RequestID{Partition: rec.Partition, Offset: rec.Offset})
	switch {
	case errors.Is(err, streams.ErrBusy):
		return res, http.StatusServiceUnavailable, errors.New("appended, but too many posts wait for verdicts here to wait for its own: read it on documents.results")
	case err != nil:
		return res, http.StatusGatewayTimeout, errors.New("appended, but no verdict within " + s.cfg.WaitTimeout.String())
	}
	s.hops.With("document", "verdict").Observe(time.Since(waited).Seconds())
	res.Verdict, res.Reason = string(v.Verdict), v.Reason
	status := map[schemas.Decision]int{schemas.Accepted: http.StatusOK, schemas.Stale: http.StatusConflict,
		schemas.Invalid: http.StatusUnprocessableEntity}[v.Verdict]
	return res, status, nil
}

// asyncParam reads whether a post asks not to wait for its verdict:
// ?async=true, or the older ?wait=false. Another value, or the two
// contradicting each other, is a 400.
func asyncParam(w http.ResponseWriter, q url.Values) (async, ok bool) {
	a, aset, err := boolParam(q, "async")
	if err == nil {
		var wait, wset bool
		wait, wset, err = boolParam(q, "wait")
		switch {
		case err != nil:
		case aset && wset && a == wait:
			err = fieldErr("async", "?async=%s contradicts ?wait=%s", q.Get("async"), q.Get("wait"))
		default:
			return a || (wset && !wait), true
		}
	}
	writeError(w, http.StatusBadRequest, err)
	return false, false
}

// boolParam reads the query parameter name as a boolean, and whether it is
// there.
func boolParam(q url.Values, name string) (value, set bool, err error) {
	if !q.Has(name) {
		return false, false, nil
	}
	switch v := q.Get(name); v {
	case "true", "1":
		return true, true, nil
	case "false", "0":
		return false, true, nil
	default:
		return false, true, fieldErr(name, "%q is neither true nor false", v)
	}
}

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Registry == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("this instance does not read the registry"))
		return
	}
	client, pk := r.PathValue("client"), r.PathValue("pk")
	// A key no document can have is the caller's mistake, said as such,
	// as a write of it is: not a 404 of a document that might come.
	if !validClient(w, client) {
		return
	}
	if err := schemas.CheckKey(pk); err != nil {
		writeError(w, http.StatusUnprocessableEntity, fieldErr("pk", "%v", err))
		return
	}
	minVersion, ok := minVersion(w, r)
	if !ok {
		return
	}
	rec, err := s.cfg.Registry.Document(r.Context(), client+"/"+pk)
	switch {
	case err == nil && rec == nil:
		// The copy may lag the verdict a writer was just given: before
		// answering 404, let it show what the registry wrote until now.
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		if synced, serr := s.cfg.Registry.DocumentSynced(ctx, client+"/"+pk); serr == nil {
			rec = synced
		}
		cancel()
	case err == nil && rec.Version < minVersion:
		// The writer of version min_version reads at least what the
		// registry had decided when it asked (that version, or what made
		// it stale).
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.WaitTimeout)
		rec, err = s.cfg.Registry.DocumentSynced(ctx, client+"/"+pk)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			writeError(w, http.StatusGatewayTimeout, fieldErr("min_version", "the registry's copy here did not catch up within %s", s.cfg.WaitTimeout))
			return
		}
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	rec = registry.AsOf(rec, time.Now(), s.cfg.Rules)
	if rec == nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("no document %s/%s", client, pk))
		return
	}
	writeJSON(w, http.StatusOK, recordJSON(rec))
}

// numeratorCheck answers the seed's compatibility rule: may data built on
// state version ?data be used with the state ?state?
func (s *Server) numeratorCheck(w http.ResponseWriter, r *http.Request) {
	var vs [2]numerator.Version
	for i, name := range []string{"state", "data"} {
		v, err := numerator.ParseVersion(r.URL.Query().Get(name))
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, fieldErr(name, "want a version T.S.V.G, got %q", truncate(r.URL.Query().Get(name), 40)))
			return
		}
		vs[i] = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	states, err := numerator.States(ctx, s.cfg.Cluster)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	out := struct {
		Usable bool   `json:"usable"`
		Reason string `json:"reason,omitempty"`
	}{Usable: true}
	check := numerator.Compatible(vs[1], vs[0])
	if st, ok := numerator.StateOf(states, vs[0].String()); ok {
		check = numerator.CompatibleWith(vs[1], st)
	} else if check == nil {
		writeError(w, http.StatusNotFound, fieldErr("state", "no state %s on %s", vs[0], topics.NumeratorStates))
		return
	}
	if check != nil {
		out.Usable, out.Reason = false, check.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// numeratorShard answers where ?key goes under ?scheme (or the scheme of
// ?state, a version T.S.V.G).
func (s *Server) numeratorShard(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var scheme int64
	var err error
	switch {
	case q.Has("state") == q.Has("scheme"):
		writeError(w, http.StatusUnprocessableEntity, fieldErr("scheme", "give scheme or state, one of them"))
		return
	case q.Has("state"):
		var v numerator.Version
		if v, err = numerator.ParseVersion(q.Get("state")); err != nil {
			writeError(w, http.StatusUnprocessableEntity, fieldErr("state", "want a version T.S.V.G, got %q", truncate(q.Get("state"), 40)))
			return
		}
		scheme = v.S
	default:
		if scheme, err = strconv.ParseInt(q.Get("scheme"), 10, 64); err != nil {
			writeError(w, http.StatusUnprocessableEntity, fieldErr("scheme", "want an integer, got %q", truncate(q.Get("scheme"), 40)))
			return
		}
	}
	p, err := sharding.Place(scheme, q.Get("key"))
	switch {
	case errors.Is(err, sharding.ErrUnknownScheme):
		writeError(w, http.StatusUnprocessableEntity, fieldErr("scheme", "%v", err))
	case err != nil:
		writeError(w, http.StatusUnprocessableEntity, fieldErr("key", "%v", err))
	default:
		writeJSON(w, http.StatusOK, p)
	}
}

// numeratorLookup answers a key's (shard, doc_id) under the state of a
// version (numerator.Lookup), the key's four parts the path's last four: 404 for a version with no valid state, 410
// when the key changed too often since for it to be kept.
func (s *Server) numeratorLookup(w http.ResponseWriter, r *http.Request) {
	version := r.PathValue("version")
	key := strings.Join([]string{r.PathValue("business_id"), r.PathValue("offer_id"), r.PathValue("shop_id"), r.PathValue("warehouse_id")}, "/")
	if _, err := numerator.ParseVersion(version); err != nil {
		writeError(w, http.StatusUnprocessableEntity, fieldErr("version", "want a version T.S.V.G, got %q", truncate(version, 40)))
		return
	}
	if _, err := sharding.ParseKey(key); err != nil {
		writeError(w, http.StatusUnprocessableEntity, fieldErr("key", "%v", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	looked, err := numerator.Lookup(ctx, s.cfg.Cluster, version, []string{key})
	switch {
	case errors.Is(err, numerator.ErrNoState):
		writeError(w, http.StatusNotFound, err)
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err)
	case looked[0].Err != nil:
		writeError(w, http.StatusGone, looked[0].Err)
	default:
		writeJSON(w, http.StatusOK, looked[0])
	}
}

// numeratorStates lists numerator.states: every state, oldest first, and
// the builds refused (invalid).
func (s *Server) numeratorStates(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	states, err := numerator.States(ctx, s.cfg.Cluster)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	type stateJSON struct {
		Version    string    `json:"version"`
		Generation int64     `json:"generation"`
		Holder     string    `json:"holder"`
		Ticket     int64     `json:"ticket"`
		SealedAt   time.Time `json:"sealed_at"`
		Invalid    string    `json:"invalid,omitempty"`
	}
	out := make([]stateJSON, 0, len(states))
	for _, st := range states {
		out = append(out, stateJSON{st.Version, st.Generation, st.Holder, st.Ticket, st.SealedAt.UTC(), st.Invalid})
	}
	writeJSON(w, http.StatusOK, map[string]any{"states": out})
}
