package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// memberPrefix starts the Kafka client id of a searcher member that
// serves searches: the rest is its URL. The API finds the members, and
// which partitions each holds, by describing the searcher's group.
const memberPrefix = "offerlog-searcher|"

// memberClientID is the client id of a member reached at url.
func memberClientID(url string) kgo.Opt { return kgo.ClientID(memberPrefix + url) }

type tokenKey struct{}

// WithToken returns ctx carrying the Authorization header a Remote sends
// the members: the caller's, so that each member checks its scope.
func WithToken(ctx context.Context, header string) context.Context {
	return context.WithValue(ctx, tokenKey{}, header)
}

// RemoteConfig is a Remote's.
type RemoteConfig struct {
	Cluster *streams.Cluster
	Epochs  Epochs
	// HTTP asks the members (default: a client of a 30 s timeout).
	HTTP   *http.Client
	Logger *slog.Logger
}

// Remote searches through the searcher members of the cluster: a query
// fans out to every member of the searcher's group (each answers for the
// partitions it holds), and the answers are merged (Merge). A member that
// does not answer makes the answer partial, naming its partitions. Safe
// for concurrent use.
type Remote struct {
	cfg RemoteConfig
}

// NewRemote returns a Remote of cfg.
func NewRemote(cfg RemoteConfig) *Remote {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Remote{cfg: cfg}
}

// members returns the URLs of the searcher's members that serve searches.
func (r *Remote) members(ctx context.Context) ([]string, error) {
	groups, err := r.cfg.Cluster.Admin().DescribeGroups(ctx, Group)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range groups {
		for _, m := range g.Members {
			if url, ok := strings.CutPrefix(m.ClientID, memberPrefix); ok && url != "" {
				out = append(out, url)
			}
		}
	}
	return out, nil
}

// Search runs q over the client's documents on every member.
func (r *Remote) Search(ctx context.Context, client string, q Query) (*Result, error) {
	if _, _, err := prepare(r.cfg.Epochs, client, &q); err != nil {
		return nil, err
	}
	n, err := streams.PartitionsOf(ctx, r.cfg.Cluster.Admin(), topics.SaasTopic(client))
	if err != nil {
		return nil, err
	}
	urls, err := r.members(ctx)
	if err != nil {
		return nil, fmt.Errorf("search: the searcher's members: %w", err)
	}
	ask := q
	ask.WithSort = true
	if q.KNN != nil {
		ask.Limit, ask.Cursor = q.KNN.K, ""
	}
	body, err := json.Marshal(ask)
	if err != nil {
		return nil, err
	}
	type reply struct {
		res *Result
		err error
	}
	replies := make(chan reply, len(urls))
	var wg sync.WaitGroup
	for _, url := range urls {
		wg.Go(func() {
			res, err := r.ask(ctx, url, client, body)
			replies <- reply{res, err}
		})
	}
	wg.Wait()
	close(replies)
	var answers []*Result
	for rep := range replies {
		var qe *QueryError
		var we *WaitError
		switch {
		case rep.err == nil:
			answers = append(answers, rep.res)
		case errors.As(rep.err, &qe), errors.As(rep.err, &we), errors.Is(rep.err, ErrUnknownClient), errors.Is(rep.err, errRefused):
			return nil, rep.err // the query's fault, not the member's
		default:
			// Its partitions go missing from the answer.
			r.cfg.Logger.Warn("search: a member did not answer", "err", rep.err)
		}
	}
	return Merge(q, n, answers)
}

// errRefused is a member's 401 or 403: the caller's, not the member's.
var errRefused = errors.New("refused")

// ask sends a search to one member.
func (r *Remote) ask(ctx context.Context, url, client string, body []byte) (*Result, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/clients/"+client+"/search", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t, ok := ctx.Value(tokenKey{}).(string); ok && t != "" {
		req.Header.Set("Authorization", t)
	}
	resp, err := r.cfg.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		var res Result
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, fmt.Errorf("search: %s: %w", url, err)
		}
		return &res, nil
	}
	var e struct{ Error, Field string }
	_ = json.Unmarshal(data, &e)
	switch resp.StatusCode {
	case http.StatusUnprocessableEntity:
		return nil, &QueryError{Member: e.Field, Reason: e.Error}
	case http.StatusNotFound:
		return nil, fmt.Errorf("%q: %w", client, ErrUnknownClient)
	case http.StatusGatewayTimeout:
		return nil, &WaitError{Applied: -1, reason: e.Error}
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%w: %s", errRefused, e.Error)
	}
	return nil, fmt.Errorf("search: %s answered %s: %s", url, resp.Status, e.Error)
}
