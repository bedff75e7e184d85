package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/offerapi"
	"github.com/offerlog/offerlog/schemas"
)

// routeOffers adds the offer API's routes.
func (s *Server) routeOffers() {
	// Every route answers 503 where the offer API does not run.
	route := func(pattern string, need access, h http.HandlerFunc) {
		s.route(pattern, need, func(w http.ResponseWriter, r *http.Request) {
			if s.offersOn(w) {
				h(w, r)
			}
		})
	}
	route("POST /v1/drafts/current", anyToken, s.currentDraft)
	route("PUT /v1/drafts/{id}", anyToken, s.saveDraft)
	route("POST /v1/drafts/{id}/publish", anyToken, s.publishDraft)
	route("GET /v1/offers/{id}", anyToken, s.getOffer)
	route("GET /v1/offers/{id}/stages", anyToken, s.getOfferStages)
	route("PUT /v1/offers/{id}", anyToken, s.updateOffer)
	route("DELETE /v1/offers/{id}", anyToken, s.deleteOffer)
	route("GET /v1/sellers/{seller}/offers", sellerPath, s.listOffers)
	route("GET /v1/sellers/{seller}/counters", sellerPath, s.counters)
	route("POST /v1/sellers/{seller}/feeds/{task}", sellerPath, s.feedItems)
	route("GET /v1/sellers/{seller}/feeds/{task}", sellerPath, s.feedStatus)
	route("POST /v1/sellers/{seller}/feeds/{task}/finish", sellerPath, s.finishFeed)
}

// offerError writes a service error with its status.
func offerError(w http.ResponseWriter, err error) {
	var e *offerapi.Error
	if !errors.As(err, &e) {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	status := map[offerapi.Kind]int{offerapi.Invalid: http.StatusUnprocessableEntity, offerapi.NotFound: http.StatusNotFound,
		offerapi.Forbidden: http.StatusForbidden,
		offerapi.Conflict:  http.StatusConflict, offerapi.Unavailable: http.StatusServiceUnavailable,
		offerapi.Timeout: http.StatusGatewayTimeout}[e.Kind]
	if e.Kind == offerapi.Conflict && e.Version > 0 {
		writeJSON(w, status, struct {
			Error
			Version int64 `json:"version"`
		}{Error{Error: e.Reason, Field: e.Field}, e.Version})
		return
	}
	writeJSON(w, status, Error{Error: e.Reason, Field: e.Field})
}

func (s *Server) offersOn(w http.ResponseWriter) bool {
	if s.cfg.Offers == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("the offer API is not running here"))
		return false
	}
	return true
}

// draftOwner names a visitor: anonymous, logged in, or both.
type draftOwner struct {
	Anon     string `json:"anon"`
	User     string `json:"user"`
	Category string `json:"category"`
}

func (s *Server) currentDraft(w http.ResponseWriter, r *http.Request) {
	var body draftOwner
	if status, err := decodeBody(w, r, 1<<16, &body); err != nil {
		writeError(w, status, err)
		return
	}
	d, err := s.cfg.Offers.CurrentDraft(r.Context(), body.Anon, body.User, body.Category)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) saveDraft(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Anon  string         `json:"anon"`
		User  string         `json:"user"`
		Offer *schemas.Offer `json:"offer"`
	}
	if status, err := decodeBody(w, r, 2<<20, &body); err != nil {
		writeError(w, status, err)
		return
	}
	d, err := s.cfg.Offers.SaveDraft(r.Context(), body.Anon, body.User, r.PathValue("id"), body.Offer)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) publishDraft(w http.ResponseWriter, r *http.Request) {
	var body struct {
		User    string `json:"user"`
		Version int64  `json:"version"`
	}
	if status, err := decodeBody(w, r, 1<<16, &body); err != nil {
		writeError(w, status, err)
		return
	}
	o, err := s.cfg.Offers.PublishDraft(r.Context(), body.User, r.PathValue("id"), body.Version)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, o)
}

// minVersion returns r's min_version (0 if none): the version a writer
// was given, which its read waits for. A bad one is answered 400 here, and
// ok is false.
func minVersion(w http.ResponseWriter, r *http.Request) (n int64, ok bool) {
	v := r.URL.Query().Get("min_version")
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		writeError(w, http.StatusBadRequest, fieldErr("min_version", "want a version (an integer from 0), got %q", v))
		return 0, false
	}
	return n, true
}

func (s *Server) getOffer(w http.ResponseWriter, r *http.Request) {
	minVersion, ok := minVersion(w, r)
	if !ok {
		return
	}
	o, err := s.cfg.Offers.Offer(r.Context(), r.PathValue("id"), minVersion)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// getOfferStages answers which stage queues hold an offer and its pending
// timers.
func (s *Server) getOfferStages(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.Offers.Stages(r.Context(), r.PathValue("id"))
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) updateOffer(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SellerID        string         `json:"seller_id"`
		ExpectedVersion *int64         `json:"expected_version"`
		Offer           *schemas.Offer `json:"offer"`
	}
	if status, err := decodeBody(w, r, 2<<20, &body); err != nil {
		writeError(w, status, err)
		return
	}
	if body.ExpectedVersion == nil {
		writeError(w, http.StatusUnprocessableEntity, fieldErr("expected_version", "required (-1 to overwrite any version)"))
		return
	}
	o, err := s.cfg.Offers.Update(r.Context(), body.SellerID, r.PathValue("id"), *body.ExpectedVersion, body.Offer)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Server) deleteOffer(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	expected := int64(-1)
	if v := q.Get("expected_version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fieldErr("expected_version", "want an integer, got %q", v))
			return
		}
		expected = n
	}
	v, err := s.cfg.Offers.Delete(r.Context(), q.Get("seller_id"), r.PathValue("id"), expected)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"version": v})
}

func (s *Server) listOffers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fieldErr("limit", "want an integer, got %q", v))
			return
		}
		limit = n
	}
	p, err := s.cfg.Offers.List(r.Context(), r.PathValue("seller"), q.Get("preset"), q.Get("page_token"), limit)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) counters(w http.ResponseWriter, r *http.Request) {
	c, err := s.cfg.Offers.Counters(r.Context(), r.PathValue("seller"))
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func taskOf(w http.ResponseWriter, r *http.Request) (int64, bool) {
	task, err := strconv.ParseInt(r.PathValue("task"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fieldErr("task_id", "want an integer, got %q", r.PathValue("task")))
		return 0, false
	}
	return task, true
}

// feedCollectEvery is how much of an upload is decoded between collections.
const feedCollectEvery = 16 << 20

// maxFeedLine bounds one item (one line) of a feed upload.
const maxFeedLine = 2 << 20

// tooLarge is a part of a request over its limit: a 413 that says the
// limit.
type tooLarge struct {
	what  string
	limit int
	unit  string
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("%s is longer than %d bytes (%d MiB), the most %s may take", e.what, e.limit, e.limit>>20, e.unit)
}

// maxFeedBody bounds one upload request; bigger feeds come in several.
const maxFeedBody = 64 << 20

// feedItems takes NDJSON lines {"external_id": ..., "offer": {...}}; a bad
// line fails the request with its number and nothing is appended. The body
// is spooled to a temporary file and read twice (check, then append), so
// an upload of any size up to maxFeedBody takes the memory of one batch.
func (s *Server) feedItems(w http.ResponseWriter, r *http.Request) {
	task, ok := taskOf(w, r)
	if !ok {
		return
	}
	spool, err := os.CreateTemp("", "offerlog-feed-*")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	if _, err := io.Copy(spool, http.MaxBytesReader(w, r.Body, maxFeedBody)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("an upload request is at most %d bytes: send the feed in several", maxFeedBody))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("read the items: %w", err))
		return
	}
	src := func(fn func(*schemas.FeedItem) error) error {
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return err
		}
		sc := bufio.NewScanner(spool)
		sc.Buffer(make([]byte, 0, 1<<16), maxFeedLine)
		read, n := 0, 1
		for ; sc.Scan(); n++ {
			// Decoding makes garbage in proportion to the upload; collect
			// it every 16 MiB rather than let a large upload grow the heap
			// by the collector's slack (+150 MiB for 60 MB, measured).
			if read += len(sc.Bytes()); read >= feedCollectEvery {
				read = 0
				runtime.GC()
			}
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var it struct {
				ExternalID string         `json:"external_id"`
				Offer      *schemas.Offer `json:"offer"`
			}
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&it); err != nil {
				return fieldErr(fmt.Sprintf("line %d", n), "%v", jsonError(err))
			}
			if err := fn(&schemas.FeedItem{ExternalID: it.ExternalID, Offer: it.Offer}); err != nil {
				return err
			}
		}
		if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
			return &tooLarge{what: fmt.Sprintf("line %d", n), limit: maxFeedLine, unit: "one item"}
		} else if err != nil {
			return fmt.Errorf("read the items: %w", err)
		}
		return nil
	}
	n, err := s.cfg.Offers.FeedItems(r.Context(), r.PathValue("seller"), task, src)
	var fe *FieldError
	var tl *tooLarge
	switch {
	case errors.As(err, &tl):
		writeError(w, http.StatusRequestEntityTooLarge, &FieldError{Field: tl.what, Reason: tl.Error()})
		return
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, fe)
		return
	case err != nil:
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]int{"accepted": n})
}

func (s *Server) feedStatus(w http.ResponseWriter, r *http.Request) {
	task, ok := taskOf(w, r)
	if !ok {
		return
	}
	st, err := s.cfg.Offers.FeedStatus(r.Context(), r.PathValue("seller"), task)
	if err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) finishFeed(w http.ResponseWriter, r *http.Request) {
	task, ok := taskOf(w, r)
	if !ok {
		return
	}
	// The body is optional: {"failed":true} for an upload that failed,
	// {"items":N} for one of N distinct external ids; either way nothing is
	// removed unless the loader sees the upload whole.
	var end offerapi.FeedEnd
	if r.ContentLength != 0 {
		if status, err := decodeBody(w, r, 4<<10, &end); err != nil && !errors.Is(err, errEmptyBody) {
			writeError(w, status, err)
			return
		}
	}
	if err := s.cfg.Offers.FinishFeed(r.Context(), r.PathValue("seller"), task, end); err != nil {
		offerError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "finishing"})
}
