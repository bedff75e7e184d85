package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/serving/search"
)

// Searcher runs searches of a client's documents (search.Searcher).
type Searcher interface {
	Search(ctx context.Context, client string, q search.Query) (*search.Result, error)
}

// postSearch is POST /v1/clients/{client}/search: the query as JSON.
func (s *Server) postSearch(w http.ResponseWriter, r *http.Request) {
	client := r.PathValue("client")
	if !validClient(w, client) {
		return
	}
	var q search.Query
	if status, err := decodeBody(w, r, 1<<20, &q); err != nil {
		writeError(w, status, err)
		return
	}
	serveSearch(w, r, s.cfg.Search, client, q)
}

// getSearch is GET /v1/clients/{client}/search?q=WORDS&limit=N&cursor=C:
// the simple case, words anywhere.
func (s *Server) getSearch(w http.ResponseWriter, r *http.Request) {
	client := r.PathValue("client")
	if !validClient(w, client) {
		return
	}
	v := r.URL.Query()
	q := search.Query{Query: v.Get("q"), Cursor: v.Get("cursor")}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, fieldErr("limit", "want an integer, got %q", l))
			return
		}
		q.Limit = n
	}
	serveSearch(w, r, s.cfg.Search, client, q)
}

// MemberSearch is a searcher member's POST /v1/clients/{client}/search,
// which the API fans searches out to (search.Remote): the caller's token,
// as the API forwards it, is checked as the API's route checks it.
func MemberSearch(searcher Searcher, a *auth.Authenticator) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, err := a.Request(r)
		if err == nil {
			err = auth.FromContext(ctx).Check(auth.Client, r.PathValue("client"))
		}
		if err != nil {
			authError(w, err)
			return
		}
		client := r.PathValue("client")
		if !validClient(w, client) {
			return
		}
		var q search.Query
		if status, err := decodeBody(w, r, 1<<20, &q); err != nil {
			writeError(w, status, err)
			return
		}
		serveSearch(w, r.WithContext(ctx), searcher, client, q)
	}
}

func serveSearch(w http.ResponseWriter, r *http.Request, searcher Searcher, client string, q search.Query) {
	if searcher == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("no searcher"))
		return
	}
	ctx := search.WithToken(r.Context(), r.Header.Get("Authorization"))
	res, err := searcher.Search(ctx, client, q)
	var qe *search.QueryError
	var we *search.WaitError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.As(err, &qe):
		writeError(w, http.StatusUnprocessableEntity, fieldErr(qe.Member, "%s", qe.Reason))
	case errors.Is(err, search.ErrUnknownClient):
		writeError(w, http.StatusNotFound, fmt.Errorf("client %q has no epoch", client))
	case errors.As(err, &we):
		writeError(w, http.StatusGatewayTimeout, fieldErr("after", "%s", we.Error()))
	case r.Context().Err() != nil:
		writeError(w, http.StatusServiceUnavailable, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}
