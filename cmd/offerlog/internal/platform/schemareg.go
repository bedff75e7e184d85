package platform

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// startSchemas makes every process follow schemas.registered, so that a
// record written with a schema registered through any API process decodes
// here; a record naming a schema not known yet waits (at most 5 s) for
// this process to read the topic to its end before it is refused.
func startSchemas(ctx context.Context, p *process) {
	var pos streams.Position
	ready := make(chan struct{})
	p.ready = append(p.ready, ready)
	adm := p.adm
	remove := schemas.AddMissHook(func() bool {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return pos.Sync(sctx, adm, topics.SchemasRegistered) == nil
	})
	p.closers = append(p.closers, remove)
	p.sup.Go(ctx, "schemas", false, func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() {
			errc <- streams.RunLoop(ctx, streams.LoopConfig{Name: "schemas", Cluster: p.kafka, Topics: []string{topics.SchemasRegistered},
				Logger: p.log, BatchHandler: func(_ context.Context, b *streams.Batch) error {
					for _, r := range b.Records {
						if err := registerRecord(&p.compat, r.Value); err != nil {
							p.log.Warn("schemas: a registered schema is not usable", "offset", r.Offset, "err", err)
						}
						pos.Advance(r.Partition, r.Offset+1)
					}
					return nil
				}})
		}()
		for {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := pos.Sync(sctx, adm, topics.SchemasRegistered)
			cancel()
			if err == nil {
				close(ready)
				break
			}
			if ctx.Err() != nil {
				break
			}
			p.log.Warn("schemas: registered schemas not read to the end yet", "err", err)
		}
		err := <-errc
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	})
}

// registerRecord registers the schema of a schemas.registered value, or
// sets the level it names in compat.
func registerRecord(compat *schemas.Compatibilities, value []byte) error {
	if value == nil {
		return nil // a tombstone: registrations are never removed, the schema stays known
	}
	var rs schemas.RegisteredSchema
	if err := schemas.RegisteredSchemas.Decode(value, &rs); err != nil {
		return fmt.Errorf("not a registered schema: %w", err)
	}
	if rs.Schema == "" {
		return compat.Set(rs.Subject, rs.Compatibility)
	}
	_, err := schemas.Register(rs.Schema)
	return err
}
