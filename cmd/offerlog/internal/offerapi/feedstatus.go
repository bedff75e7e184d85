package offerapi

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/offerlog/offerlog/processors/feeds"
	"github.com/offerlog/offerlog/schemas"
)

// States of a feed task before the loader reaches it, as the API process
// that takes its upload knows them.
const (
	// FeedParsing is a task whose upload this process is reading.
	FeedParsing = "PARSING"
	// FeedQueued is a task whose items are on feeds.ingest, not yet
	// reached by the loader.
	FeedQueued = "QUEUED"
)

// FeedTaskStatus is the answer to a feed status request: the loader's
// status (schemas.FeedStatus), or, before the loader wrote one, PARSING or
// QUEUED with the items this process accepted.
type FeedTaskStatus struct {
	schemas.FeedStatus
	// Accepted is how many items this API process appended for the task.
	Accepted int64 `json:"accepted,omitempty"`
	// Summary says it in words: "8 of 10 offers applied".
	Summary string `json:"summary"`
}

// maxUploads bounds the uploads an API process remembers.
const maxUploads = 10_000

// uploads are the feed uploads this process took, by feeds.status key:
// what the loader has not written yet. Another API process does not know
// them: a task shows there once the loader reaches it.
type uploads struct {
	mu    sync.Mutex
	tasks map[string]*upload
	order []string // oldest first, for eviction
}

type upload struct {
	parsing  int // uploads being read
	accepted int64
	at       time.Time
}

func (u *uploads) get(key string) (upload, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.tasks[key]
	if !ok {
		return upload{}, false
	}
	return *t, true
}

// begin notes an upload of the task being read; the returned func ends
// it, with the items appended (0 for a refused upload).
func (u *uploads) begin(key string) func(accepted int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tasks == nil {
		u.tasks = map[string]*upload{}
	}
	t, ok := u.tasks[key]
	if !ok {
		t = &upload{}
		u.tasks[key] = t
		u.order = append(u.order, key)
		for len(u.order) > maxUploads {
			delete(u.tasks, u.order[0])
			u.order = u.order[1:]
		}
	}
	t.parsing++
	t.at = time.Now()
	return func(accepted int) {
		u.mu.Lock()
		defer u.mu.Unlock()
		t.parsing--
		t.accepted += int64(accepted)
	}
}

// FeedStatus returns the status of seller's feed task: the loader's once it
// reached the task, else what this process knows of its upload (PARSING,
// QUEUED), else NotFound.
func (s *Service) FeedStatus(ctx context.Context, seller string, task int64) (*FeedTaskStatus, error) {
	if err := feedTarget(ctx, seller, task); err != nil {
		return nil, err
	}
	key := feeds.StatusKey(seller, task)
	local, known := s.uploads.get(key)
	out := &FeedTaskStatus{FeedStatus: schemas.FeedStatus{SellerID: seller, TaskID: task}, Accepted: local.accepted}
	if s.cfg.StatusView != nil {
		v, err := s.cfg.StatusView.Get(key)
		if err != nil {
			return nil, &Error{Kind: Unavailable, Reason: err.Error()}
		}
		if st, ok := v.(*schemas.FeedStatus); ok {
			out.FeedStatus = *st
			known = true
		}
	}
	switch {
	case !known:
		return nil, errorf(NotFound, "task", "no upload of task %d of seller %s is known", task, seller)
	case local.parsing > 0:
		out.State = FeedParsing
	case out.State == "":
		out.State, out.UpdatedAt = FeedQueued, local.at.UTC()
	}
	out.Summary = summary(out)
	return out, nil
}

func summary(st *FeedTaskStatus) string {
	of := max(st.Received, st.Uploaded, st.Accepted)
	s := ""
	switch st.State {
	case FeedParsing:
		s = "reading the upload"
	case FeedQueued:
		s = "queued for the loader"
	default:
		s = strconv.FormatInt(st.Applied, 10) + " of " + strconv.FormatInt(of, 10) + " offers applied"
		if st.Refused > 0 {
			s += ", " + strconv.FormatInt(st.Refused, 10) + " refused"
		}
		if st.Deleted > 0 {
			s += ", " + strconv.FormatInt(st.Deleted, 10) + " removed"
		}
		switch st.State {
		case schemas.FeedDone:
			s += "; done"
		case schemas.FeedPartial, schemas.FeedFailed:
			s += "; " + st.Reason
		}
	}
	return s
}
