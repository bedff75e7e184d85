package indexer

import (
	"fmt"

	"github.com/offerlog/offerlog/schemas"
)

// Converted is what one change becomes.
type Converted struct {
	// Saas is the search feed record; never nil for a valid change.
	Saas *schemas.SaasDocument
	// Yt is the archive record, nil for changes that are no new version
	// (expiries).
	Yt *schemas.YtRecord
}

// Converter turns a registry change into feed records. Implementations must
// be pure and safe for concurrent use; an error sends the change to the
// failed queue.
type Converter func(*schemas.RegistryRecord) (Converted, error)

// Convert is the indexer's conversion: a live record becomes an UPSERT of
// the search feed, a tombstone a DELETE; changes made by an ingested
// document are archived with their body.
func Convert(r *schemas.RegistryRecord) (Converted, error) {
	var out Converted
	s := &schemas.SaasDocument{PK: r.PK, Epoch: r.Epoch, Version: r.Version, Timestamp: r.Timestamp,
		Fields: r.Fields, Embeddings: r.Embeddings}
	switch r.Status {
	case schemas.StatusLive:
		s.Action = schemas.ActionUpsert
		s.ExpiresAt = r.ExpiresAt
	case schemas.StatusTombstone:
		s.Action = schemas.ActionDelete
		s.Fields, s.Embeddings = []schemas.Field{}, []schemas.Embedding{}
	default:
		return out, fmt.Errorf("record %s/%s has unknown status %q", r.Client, r.PK, r.Status)
	}
	if s.Fields == nil {
		s.Fields = []schemas.Field{}
	}
	if s.Embeddings == nil {
		s.Embeddings = []schemas.Embedding{}
	}
	out.Saas = s
	if r.Cause == schemas.CauseIngest {
		out.Yt = &schemas.YtRecord{PK: r.PK, Action: s.Action, Epoch: r.Epoch, Version: r.Version,
			Timestamp: r.Timestamp, TTLSeconds: r.TTLSeconds, Fields: s.Fields, Embeddings: s.Embeddings,
			IngestedAt: r.IngestedAt, SourcePartition: r.SourcePartition, SourceOffset: r.SourceOffset}
	}
	return out, nil
}
