package registry

import (
	"context"
	"fmt"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams/table"
)

// View is a read-only copy of the registry table kept up to date from its
// changelog, for readers outside the processor (the HTTP API, the indexer's
// retries). Get is safe for concurrent use.
type View struct {
	v *table.View
}

// NewView returns a view of the registry table. name tells apart the local
// storage of several views in one process.
func NewView(cfg table.Config, name string) (*View, error) {
	return &View{v: table.NewView(cfg, Table, TableCodec, name)}, nil
}

// Run keeps the view up to date until ctx is done.
func (v *View) Run(ctx context.Context) error {
	if err := v.v.Run(ctx); err != nil {
		return fmt.Errorf("registry view: %w", err)
	}
	return nil
}

// Ready returns a channel closed once the view has recovered the table.
func (v *View) Ready() <-chan struct{} { return v.v.Ready() }

// Get returns the record of key ("client/pk"), or nil if the registry holds
// none. It returns an error if the view is not running.
func (v *View) Get(key string) (*schemas.RegistryRecord, error) {
	val, err := v.v.Get(key)
	if err != nil {
		return nil, fmt.Errorf("registry view: %w", err)
	}
	rec, _ := val.(*schemas.RegistryRecord)
	return rec, nil
}

// Fresh returns nil if the view is not behind the registry table for
// longer than its bound (table.View.Fresh).
func (v *View) Fresh() error { return v.v.Fresh() }

// View is the table view under v, for its supervisor (staleness, bounds).
func (v *View) View() *table.View { return v.v }

// Sync waits until the view shows every change the registry wrote before
// the call (table.View.Sync).
func (v *View) Sync(ctx context.Context) error { return v.v.Sync(ctx) }
