package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// VerdictResult is the answer of a verdict lookup: the post's position
// and pk, and its verdict (Pending while the registry has not given it).
type VerdictResult struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	PK        string `json:"pk"`
	Verdict   string `json:"verdict,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Pending   bool   `json:"pending,omitempty"`
}

// getVerdict answers the verdict on the post an async POST appended at
// {partition}/{offset} of documents.ingest, so that a client need not
// read documents.results: 200 with it; 202 while the registry has not
// decided it; 404 where no post of {client} is; 410 once the registry
// no longer remembers it (table.RememberWindow later messages of its
// partition: documents.results keeps it).
func (s *Server) getVerdict(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Registry == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("this instance does not read the registry"))
		return
	}
	client := r.PathValue("client")
	if !validClient(w, client) {
		return
	}
	partition, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || partition < 0 {
		writeError(w, http.StatusBadRequest, fieldErr("partition", "want a partition of %s, got %q", topics.DocumentsIngest, truncate(r.PathValue("partition"), 20)))
		return
	}
	offset, err := strconv.ParseInt(r.PathValue("offset"), 10, 64)
	if err != nil || offset < 0 {
		writeError(w, http.StatusBadRequest, fieldErr("offset", "want a non-negative offset, got %q", truncate(r.PathValue("offset"), 20)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	key, err := s.ingestKey(ctx, int32(partition), offset)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	pk, mine := strings.CutPrefix(key, client+"/")
	if !mine {
		// Nothing, or another client's: said alike, so that a position
		// tells nothing of another client's posts.
		writeError(w, http.StatusNotFound, fmt.Errorf("no post of %s at %s[%d]@%d", client, topics.DocumentsIngest, partition, offset))
		return
	}
	res := VerdictResult{Partition: int32(partition), Offset: offset, PK: pk}
	rec, err := s.cfg.Registry.DocumentSynced(ctx, key)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	v, found, seen := registry.Recall(rec, int32(partition), offset)
	switch {
	case found:
		res.Verdict, res.Reason = string(v.Verdict), v.Reason
		writeJSON(w, http.StatusOK, res)
	case seen:
		writeError(w, http.StatusGone, fmt.Errorf("the post at %s[%d]@%d was decided and its verdict is no longer kept with its document: read it on %s",
			topics.DocumentsIngest, partition, offset, topics.DocumentsResults))
	default:
		res.Pending = true
		writeJSON(w, http.StatusAccepted, res)
	}
}

// ingestKey returns the key of the record at offset of a partition of
// documents.ingest, "" if there is none (a partition or an offset past
// the end, a record removed).
func (s *Server) ingestKey(ctx context.Context, partition int32, offset int64) (string, error) {
	ends, err := streams.EndOffsets(ctx, s.adm, topics.DocumentsIngest)
	if err != nil {
		return "", err
	}
	if end, ok := ends[partition]; !ok || offset >= end {
		return "", nil
	}
	var key string
	err = streams.ReadRange(ctx, s.cfg.Cluster, topics.DocumentsIngest, map[int32]int64{partition: offset}, map[int32]int64{partition: offset + 1},
		func(r *kgo.Record) {
			if r.Offset == offset {
				key = string(r.Key)
			}
		})
	if err != nil {
		return "", fmt.Errorf("read the post: %w", err)
	}
	return key, nil
}
