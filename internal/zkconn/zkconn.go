// Package zkconn opens ZooKeeper sessions the way every offerlog component
// needs them: logged through slog, and usable when returned.
package zkconn

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Dial connects to the ensemble servers ("host:port,...") with the given
// session timeout and waits until the session is established. The events
// channel reports every later change of the session; the caller must drain
// it.
func Dial(ctx context.Context, servers string, timeout time.Duration, log *slog.Logger) (*zk.Conn, <-chan zk.Event, error) {
	if log == nil {
		log = slog.Default()
	}
	conn, events, err := zk.Connect(strings.Split(servers, ","), timeout, zk.WithLogger(logger{log.With("component", "zookeeper")}))
	if err != nil {
		return nil, nil, fmt.Errorf("zookeeper: connect %s: %w", servers, err)
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, events, nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, nil, fmt.Errorf("zookeeper: connect %s: %w", servers, ctx.Err())
		}
	}
}

type logger struct{ l *slog.Logger }

func (z logger) Printf(format string, args ...any) { z.l.Debug(fmt.Sprintf(format, args...)) }
