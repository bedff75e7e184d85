package platform_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/documentv1"
	"github.com/offerlog/offerlog/schemas/proto/offerv1"
	"github.com/offerlog/offerlog/schemas/proto/searchv1"
	"github.com/offerlog/offerlog/schemas/proto/servingv1"
	"github.com/offerlog/offerlog/schemas/proto/stagev1"
	"github.com/offerlog/offerlog/streams"
)

// secured is a platform with auth on, and a producer of its tokens.
type secured struct {
	*platformtest.Running
	t     *testing.T
	admin string
	kafka *streams.Cluster // with the credentials of kafka.properties
	prod  *kgo.Client
}

// token creates a token of scope and returns its text and id.
func (s *secured) token(k auth.Kind, subject string) (string, string) {
	s.t.Helper()
	text, rec, err := auth.New(k, subject, 0, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	if err := auth.Append(context.Background(), s.prod, rec); err != nil {
		s.t.Fatal(err)
	}
	return text, rec.ID
}

// revoke revokes token id.
func (s *secured) revoke(id string) {
	s.t.Helper()
	store, err := auth.ReadAll(context.Background(), s.kafka)
	if err != nil {
		s.t.Fatal(err)
	}
	rec, _ := store.Get(id)
	rec.RevokedAt = time.Now().UnixMilli()
	if err := auth.Append(context.Background(), s.prod, rec); err != nil {
		s.t.Fatal(err)
	}
}

// must fails the test unless an answer has the status wanted, and returns
// its body.
func (s *secured) must(what string, code int, body string, want int) string {
	s.t.Helper()
	if code != want {
		s.t.Fatalf("%s: %d %s", what, code, body)
	}
	return body
}

// call sends a request with token (none if "") and returns its status
// and body.
func (s *secured) call(method, path, body, token string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, "http://"+s.Info.HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually calls until the answer's status is want (a token is known
// everywhere within seconds, not at once).
func (s *secured) eventually(want int, method, path, body, token string) {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, b := s.call(method, path, body, token)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startSecured(t *testing.T, options ...func(*platform.Config)) *secured {
	cfg := platformtest.Config(t.TempDir())
	cfg.Insecure = false
	for _, o := range options {
		o(&cfg)
	}
	r := platformtest.Start(t, cfg)
	path := filepath.Join(cfg.DataDir, platform.AdminTokenFile)
	if r.Info.AdminToken != path {
		t.Fatalf("info names admin token %q, want %q", r.Info.AdminToken, path)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", path, st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	// The embedded broker requires SASL now: a client without the
	// credentials of kafka.properties is refused; with them, served.
	if r.Info.KafkaConfig != filepath.Join(cfg.DataDir, "kafka.properties") {
		t.Fatalf("info names kafka config %q", r.Info.KafkaConfig)
	}
	bare, err := kgo.NewClient(kgo.SeedBrokers(r.Info.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := bare.Ping(ctx); err == nil {
		t.Fatal("the embedded broker served a client without credentials")
	}
	bare.Close()
	kc, err := streams.LoadKafkaConfig(r.Info.KafkaConfig)
	if err != nil {
		t.Fatal(err)
	}
	kafka, err := streams.NewCluster(r.Info.Brokers, kc.Credentials, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	prod, err := kafka.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return &secured{Running: r, t: t, admin: strings.TrimSpace(string(b)), kafka: kafka, prod: prod}
}

const secOffer = `{"category":"cars","title":"Lada Niva","price":450000,"currency":"RUB"}`

func TestEveryRouteAuthenticatesAndKeepsCallersToTheirScope(t *testing.T) {
	s := startSecured(t)
	seller, _ := s.token(auth.Seller, "s1")
	otherSeller, _ := s.token(auth.Seller, "s2")
	revokedSeller, revokedSellerID := s.token(auth.Seller, "s1")
	client, _ := s.token(auth.Client, "c1")
	reader, _ := s.token(auth.Reader, "")
	otherClient, _ := s.token(auth.Client, "c2")
	revokedClient, revokedClientID := s.token(auth.Client, "c1")
	stage, _ := s.token(auth.Stage, "expiry")

	// The open routes need no token (README, Security): the probes, the
	// metrics and the API's description.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		if code, b := s.call("GET", p, "", ""); code != http.StatusOK {
			t.Fatalf("GET %s without a token: %d %s", p, code, b)
		}
	}
	// The seller's own offer, published from a draft, for the routes by id.
	s.eventually(http.StatusOK, "POST", "/v1/drafts/current", `{"category":"cars"}`, seller)
	var d schemas.Draft
	_, body := s.call("POST", "/v1/drafts/current", `{"category":"cars"}`, seller)
	if err := json.Unmarshal([]byte(body), &d); err != nil || d.Owner != "user:s1" {
		t.Fatalf("a seller token's draft: %s (%v), want one of user:s1", body, err)
	}
	if code, b := s.call("PUT", "/v1/drafts/"+d.ID, `{"offer":`+secOffer+`}`, seller); code != http.StatusOK {
		t.Fatalf("save draft: %d %s", code, b)
	}
	if code, b := s.call("POST", "/v1/drafts/"+d.ID+"/publish", `{}`, seller); code != http.StatusCreated {
		t.Fatalf("publish: %d %s", code, b)
	}
	if code, b := s.call("PUT", "/v1/clients/c1/epochs/1", `{"fields":[{"name":"title","type":"string"}]}`, client); code != http.StatusCreated {
		t.Fatalf("epoch: %d %s", code, b)
	}
	s.revoke(revokedSellerID)
	s.revoke(revokedClientID)
	s.eventually(http.StatusUnauthorized, "GET", "/v1/sellers/s1/counters", "", revokedSeller)
	s.eventually(http.StatusUnauthorized, "GET", "/v1/clients/c1/epochs", "", revokedClient)

	type route struct {
		method, path, body string
		owner, other       string // a token of the route's owner, and one outside its scope
		revoked            string // a revoked token of the owner
	}
	doc := `{"pk":"p1","epoch":1,"version":1,"action":"UPSERT","timestamp":"2026-11-24T10:00:00Z","fields":{"title":"x"}}`
	routes := []route{
		{"PUT", "/v1/clients/c1/epochs/1", `{"fields":[{"name":"title","type":"string"}]}`, client, otherClient, revokedClient},
		{"GET", "/v1/clients/c1/epochs", "", client, otherClient, revokedClient},
		{"POST", "/v1/clients/c1/documents", doc, client, otherClient, revokedClient},
		{"GET", "/v1/clients/c1/documents/p1", "", client, otherClient, revokedClient},
		{"POST", "/v1/clients/c1/search", `{"query":"x"}`, client, otherClient, revokedClient},
		{"GET", "/v1/clients/c1/search?q=x", "", client, otherClient, revokedClient},
		{"POST", "/v1/drafts/current", `{"user":"s1","category":"cars"}`, seller, otherSeller, revokedSeller},
		{"PUT", "/v1/drafts/" + d.ID, `{"user":"s1","offer":` + secOffer + `}`, seller, otherSeller, revokedSeller},
		{"POST", "/v1/drafts/" + d.ID + "/publish", `{"user":"s1"}`, seller, otherSeller, revokedSeller},
		{"GET", "/v1/offers/" + d.ID, "", seller, otherSeller, revokedSeller},
		{"PUT", "/v1/offers/" + d.ID, `{"seller_id":"s1","expected_version":-1,"offer":` + secOffer + `}`, seller, otherSeller, revokedSeller},
		{"GET", "/v1/sellers/s1/offers", "", seller, otherSeller, revokedSeller},
		{"GET", "/v1/sellers/s1/counters", "", seller, otherSeller, revokedSeller},
		{"POST", "/v1/sellers/s1/feeds/1", `{"external_id":"e1","offer":` + secOffer + `}`, seller, otherSeller, revokedSeller},
		{"POST", "/v1/sellers/s1/feeds/1/finish", `{"failed":true}`, seller, otherSeller, revokedSeller},
		{"GET", "/schema-registry/subjects", "", seller, "", revokedSeller},
		{"GET", "/v1/schemas/" + "0", "", client, "", revokedClient},
		{"POST", "/schema-registry/subjects/x-value/versions", `{"schema":"\"string\""}`, s.admin, seller, revokedSeller},
		{"DELETE", "/v1/offers/" + d.ID + "?seller_id=s1", "", seller, otherSeller, revokedSeller},
	}
	for _, r := range routes {
		name := r.method + " " + r.path
		// Another seller's offer is not found, as a free id is not:
		// which ids exist is not told (checked below).
		other := 403
		if r.method == "GET" && strings.HasPrefix(r.path, "/v1/offers/") {
			other = 404
		}
		for _, c := range []struct {
			what, token string
			want        int
		}{{"no token", "", 401}, {"a malformed token", "olt_nope", 401}, {"a revoked token", r.revoked, 401}, {"a token of another scope", r.other, other}} {
			if c.token == "" && c.what != "no token" {
				continue
			}
			code, b := s.call(r.method, r.path, r.body, c.token)
			if code != c.want || !strings.Contains(b, `"error"`) {
				t.Errorf("%s with %s: %d %s, want a JSON %d", name, c.what, code, b, c.want)
			}
		}
		// The owner, and an admin, are let in (whatever the route then
		// answers of the request itself).
		for _, tok := range []string{r.owner, s.admin} {
			if code, b := s.call(r.method, r.path, r.body, tok); code == 401 || code == 403 {
				t.Errorf("%s with the right token: %d %s", name, code, b)
			}
		}
	}

	// Offer ids cannot be probed: another seller's offer and a free id
	// answer alike.
	free := offers.IDFrom(1)
	if free == d.ID {
		free = offers.IDFrom(2)
	}
	codeTaken, taken := s.call("GET", "/v1/offers/"+d.ID, "", otherSeller)
	codeFree, freeBody := s.call("GET", "/v1/offers/"+free, "", otherSeller)
	if codeTaken != codeFree || strings.ReplaceAll(taken, d.ID, free) != freeBody {
		t.Errorf("another seller's offer: %d %s; a free id: %d %s; want the same answer", codeTaken, taken, codeFree, freeBody)
	}
	update := `{"seller_id":"s2","expected_version":-1,"offer":` + strings.Replace(secOffer, `"s1"`, `"s2"`, 1) + `}`
	codeTaken, taken = s.call("PUT", "/v1/offers/"+d.ID, update, otherSeller)
	codeFree, freeBody = s.call("PUT", "/v1/offers/"+free, update, otherSeller)
	if codeTaken != 404 || codeTaken != codeFree || strings.ReplaceAll(taken, d.ID, free) != freeBody {
		t.Errorf("another seller updating an offer not theirs: %d %s; a free id: %d %s; want the same 404", codeTaken, taken, codeFree, freeBody)
	}

	// A body naming another seller is refused, never believed.
	if code, b := s.call("PUT", "/v1/offers/"+d.ID, `{"seller_id":"s2","expected_version":-1,"offer":`+secOffer+`}`, seller); code != 403 {
		t.Errorf("a seller token updating as another seller: %d %s, want 403", code, b)
	}
	if code, b := s.call("POST", "/v1/drafts/current", `{"user":"s2","category":"cars"}`, seller); code != 403 {
		t.Errorf("a seller token asking for another seller's draft: %d %s, want 403", code, b)
	}
	// Anonymous drafts (no user) are an admin's (the site's backend).
	if code, b := s.call("POST", "/v1/drafts/current", `{"anon":"v1","category":"cars"}`, client); code != 403 {
		t.Errorf("a client token asking for an anonymous draft: %d %s, want 403", code, b)
	}

	// Keys are at most 1 KiB of valid UTF-8: 422 naming the field. A byte
	// that is not UTF-8 (which JSON decoding would turn into U+FFFD, making
	// two keys one) is refused too.
	for _, pk := range []string{strings.Repeat("k", 10<<10), "a\xffb", `a\u0001b`} {
		body := strings.Replace(doc, `"pk":"p1"`, `"pk":"`+pk+`"`, 1)
		code, b := s.call("POST", "/v1/clients/c1/documents", body, client)
		if code != http.StatusUnprocessableEntity || !strings.Contains(b, `"field":"pk"`) {
			t.Errorf("pk %.20q: %d %s, want 422 naming pk", pk, code, b)
		}
	}

	// gRPC: the offer service, the stage states and the cache.
	conn := func(addr string) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offerConn := conn(s.Info.GRPCAddr)
	offersAPI := offerv1.NewOfferServiceClient(offerConn)
	states := stagev1.NewStageStatesClient(offerConn)
	cache := servingv1.NewCacheClient(conn(s.Info.CacheAddr))
	documents := documentv1.NewDocumentServiceClient(offerConn)
	searcher := searchv1.NewSearchServiceClient(offerConn)
	searchReq := &searchv1.SearchRequest{Client: "c1", Query: &searchv1.Query{Query: "x"}}
	send := &documentv1.SendRequest{Client: "c1", Async: true, Document: &documentv1.RawDocument{Pk: "g1", Version: 1, Epoch: 1,
		Action: documentv1.Action_UPSERT, Timestamp: timestamppb.Now(), Fields: []*documentv1.Field{{Name: "title", Value: &documentv1.Field_String_{String_: "x"}}}}}
	for _, c := range []struct {
		name  string
		token string
		call  func(opt grpc.CallOption) error
		want  codes.Code
	}{
		{"GetCounters, no token", "", func(o grpc.CallOption) error {
			_, err := offersAPI.GetCounters(ctx, &offerv1.GetCountersRequest{SellerId: "s1"}, o)
			return err
		}, codes.Unauthenticated},
		{"GetCounters, revoked", revokedSeller, func(o grpc.CallOption) error {
			_, err := offersAPI.GetCounters(ctx, &offerv1.GetCountersRequest{SellerId: "s1"}, o)
			return err
		}, codes.Unauthenticated},
		{"GetCounters, other seller", otherSeller, func(o grpc.CallOption) error {
			_, err := offersAPI.GetCounters(ctx, &offerv1.GetCountersRequest{SellerId: "s1"}, o)
			return err
		}, codes.PermissionDenied},
		{"GetCounters, own", seller, func(o grpc.CallOption) error {
			_, err := offersAPI.GetCounters(ctx, &offerv1.GetCountersRequest{SellerId: "s1"}, o)
			return err
		}, codes.OK},
		{"UpdateOffer as another seller", seller, func(o grpc.CallOption) error {
			_, err := offersAPI.UpdateOffer(ctx, &offerv1.UpdateOfferRequest{Id: d.ID, SellerId: "s2", ExpectedVersion: -1, Offer: &offerv1.Offer{Title: "x"}}, o)
			return err
		}, codes.PermissionDenied},
		{"StageStates.Read, another stage's token", stage, func(o grpc.CallOption) error {
			_, err := states.Read(ctx, &stagev1.ReadStateRequest{OfferId: d.ID, Stage: "other"}, o)
			return err
		}, codes.PermissionDenied},
		{"StageStates.Read, a seller's token", seller, func(o grpc.CallOption) error {
			_, err := states.Read(ctx, &stagev1.ReadStateRequest{OfferId: d.ID, Stage: "expiry"}, o)
			return err
		}, codes.PermissionDenied},
		{"StageStates.Update, no token", "", func(o grpc.CallOption) error {
			_, err := states.Update(ctx, &stagev1.UpdateStateRequest{OfferId: d.ID, Stage: "expiry", State: &stagev1.State{}}, o)
			return err
		}, codes.Unauthenticated},
		{"DocumentService.Send, no token", "", func(o grpc.CallOption) error {
			_, err := documents.Send(ctx, send, o)
			return err
		}, codes.Unauthenticated},
		{"DocumentService.Send, another client's token", otherClient, func(o grpc.CallOption) error {
			_, err := documents.Send(ctx, send, o)
			return err
		}, codes.PermissionDenied},
		{"DocumentService.Send, a seller's token", seller, func(o grpc.CallOption) error {
			_, err := documents.Send(ctx, send, o)
			return err
		}, codes.PermissionDenied},
		{"DocumentService.Send, the client's own token", client, func(o grpc.CallOption) error {
			_, err := documents.Send(ctx, send, o)
			return err
		}, codes.OK},
		{"SearchService.Search, another client's token", otherClient, func(o grpc.CallOption) error {
			_, err := searcher.Search(ctx, searchReq, o)
			return err
		}, codes.PermissionDenied},
		{"SearchService.Search, no token", "", func(o grpc.CallOption) error {
			_, err := searcher.Search(ctx, searchReq, o)
			return err
		}, codes.Unauthenticated},
		{"SearchService.Search, the client's own token", client, func(o grpc.CallOption) error {
			_, err := searcher.Search(ctx, searchReq, o)
			return err
		}, codes.OK},
		{"Cache.Get, a seller's token", seller, func(o grpc.CallOption) error {
			_, err := cache.Get(ctx, &servingv1.GetRequest{Keys: []string{d.ID}}, o)
			return err
		}, codes.PermissionDenied},
		{"Cache.Get, admin", s.admin, func(o grpc.CallOption) error {
			_, err := cache.Get(ctx, &servingv1.GetRequest{Keys: []string{d.ID}}, o)
			return err
		}, codes.OK},
		// the API's cache token: the cache's tables, nothing else
		{"Cache.Get, a reader's token", reader, func(o grpc.CallOption) error {
			_, err := cache.Get(ctx, &servingv1.GetRequest{Keys: []string{d.ID}}, o)
			return err
		}, codes.OK},
		{"SearchService.Search, a reader's token", reader, func(o grpc.CallOption) error {
			_, err := searcher.Search(ctx, searchReq, o)
			return err
		}, codes.PermissionDenied},
		{"DocumentService.Send, a reader's token", reader, func(o grpc.CallOption) error {
			_, err := documents.Send(ctx, send, o)
			return err
		}, codes.PermissionDenied},
	} {
		var opt grpc.CallOption = grpc.EmptyCallOption{}
		if c.token != "" {
			opt = auth.Bearer(c.token)
		}
		if got := status.Code(c.call(opt)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Every method of the offer service, with no token, a revoked one,
	// another seller's and the seller's own.
	gd, err := offersAPI.CurrentDraft(ctx, &offerv1.CurrentDraftRequest{Category: "cars"}, auth.Bearer(seller))
	if err != nil || gd.Owner != "user:s1" {
		t.Fatalf("CurrentDraft with a seller token: %v %v", gd, err)
	}
	price := int64(450000)
	pbOffer := &offerv1.Offer{Category: "cars", Title: "Lada Niva", Price: &price, Currency: "RUB"}
	if _, err := offersAPI.SaveDraft(ctx, &offerv1.SaveDraftRequest{DraftId: gd.Id, Offer: pbOffer}, auth.Bearer(seller)); err != nil {
		t.Fatal(err)
	}
	if _, err := offersAPI.PublishDraft(ctx, &offerv1.PublishDraftRequest{DraftId: gd.Id}, auth.Bearer(seller)); err != nil {
		t.Fatal(err)
	}
	methods := map[string]func(grpc.CallOption) error{
		"CurrentDraft": func(o grpc.CallOption) error {
			_, err := offersAPI.CurrentDraft(ctx, &offerv1.CurrentDraftRequest{User: "s1", Category: "cars"}, o)
			return err
		},
		"SaveDraft": func(o grpc.CallOption) error {
			_, err := offersAPI.SaveDraft(ctx, &offerv1.SaveDraftRequest{User: "s1", DraftId: gd.Id, Offer: pbOffer}, o)
			return err
		},
		"PublishDraft": func(o grpc.CallOption) error {
			_, err := offersAPI.PublishDraft(ctx, &offerv1.PublishDraftRequest{User: "s1", DraftId: gd.Id}, o)
			return err
		},
		"GetOffer": func(o grpc.CallOption) error {
			_, err := offersAPI.GetOffer(ctx, &offerv1.GetOfferRequest{Id: gd.Id}, o)
			return err
		},
		"UpdateOffer": func(o grpc.CallOption) error {
			_, err := offersAPI.UpdateOffer(ctx, &offerv1.UpdateOfferRequest{SellerId: "s1", Id: gd.Id, ExpectedVersion: -1, Offer: pbOffer}, o)
			return err
		},
		"ListOffers": func(o grpc.CallOption) error {
			_, err := offersAPI.ListOffers(ctx, &offerv1.ListOffersRequest{SellerId: "s1"}, o)
			return err
		},
		"GetCounters": func(o grpc.CallOption) error {
			_, err := offersAPI.GetCounters(ctx, &offerv1.GetCountersRequest{SellerId: "s1"}, o)
			return err
		},
		"DeleteOffer": func(o grpc.CallOption) error {
			_, err := offersAPI.DeleteOffer(ctx, &offerv1.DeleteOfferRequest{SellerId: "s1", Id: gd.Id, ExpectedVersion: -1}, o)
			return err
		},
	}
	for _, name := range []string{"CurrentDraft", "SaveDraft", "PublishDraft", "GetOffer", "UpdateOffer", "ListOffers", "GetCounters", "DeleteOffer"} {
		call := methods[name]
		for _, c := range []struct {
			what string
			opt  grpc.CallOption
			want codes.Code
		}{
			{"no token", grpc.EmptyCallOption{}, codes.Unauthenticated},
			{"a revoked token", auth.Bearer(revokedSeller), codes.Unauthenticated},
			{"another seller's token", auth.Bearer(otherSeller), codes.PermissionDenied},
			{"a client's token", auth.Bearer(client), codes.PermissionDenied},
		} {
			if name == "GetOffer" && c.want == codes.PermissionDenied {
				c.want = codes.NotFound // as a free id: ids cannot be probed
			}
			if got := status.Code(call(c.opt)); got != c.want {
				t.Errorf("OfferService.%s with %s: %v, want %v", name, c.what, got, c.want)
			}
		}
		if got := status.Code(call(auth.Bearer(seller))); got == codes.Unauthenticated || got == codes.PermissionDenied {
			t.Errorf("OfferService.%s with the seller's own token: %v", name, got)
		}
	}

	// The stage's own state: let in (the offer was deleted above: not found).
	if _, err := states.Read(ctx, &stagev1.ReadStateRequest{OfferId: d.ID, Stage: "expiry"}, auth.Bearer(stage)); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		t.Errorf("a stage reading its own state: %v", err)
	}
	// Health stays open.
	if h, err := healthpb.NewHealthClient(offerConn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without a token: %v %v", h, err)
	}
}
