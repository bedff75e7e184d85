// Package zkconn opens ZooKeeper sessions the way every offerlog component
// needs them: logged through slog, and usable when returned.
package zkconn

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// AuthEnv names the environment variable of the credentials offerlog's
// sessions authenticate with ("user:password", ZooKeeper's digest scheme);
// AuthFileEnv names a file holding them instead (compose's secrets
// directory). With them, every znode offerlog creates is its own (a digest
// ACL): a client without them can neither read nor change the numerator's
// lock and state pointer or the cache's shard owners. Without them, znodes
// are open to anyone (world ACL), as before 0.5.0, and Dial says so.
const (
	AuthEnv     = "OFFERLOG_ZOOKEEPER_AUTH"
	AuthFileEnv = "OFFERLOG_ZOOKEEPER_AUTH_FILE"
)

// Credentials returns the user and password of AuthEnv (or the file
// AuthFileEnv names); ok is false if neither is set.
func Credentials() (user, password string, ok bool, err error) {
	auth := os.Getenv(AuthEnv)
	if file := os.Getenv(AuthFileEnv); auth == "" && file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", "", false, fmt.Errorf("zookeeper: %s: %w", AuthFileEnv, err)
		}
		auth = strings.TrimSpace(string(b))
	}
	if auth == "" {
		return "", "", false, nil
	}
	user, password, found := strings.Cut(auth, ":")
	if !found || user == "" || password == "" {
		return "", "", false, fmt.Errorf("zookeeper: the credentials of %s are not user:password", AuthEnv)
	}
	return user, password, true, nil
}

// ACL is the ACL of the znodes offerlog creates: its own user's alone
// with Credentials, anyone's without.
func ACL() []zk.ACL {
	user, password, ok, err := Credentials()
	if err != nil || !ok {
		return zk.WorldACL(zk.PermAll)
	}
	return zk.DigestACL(zk.PermAll, user, password)
}

// Dial connects to the ensemble servers ("host:port,...") with the given
// session timeout, waits until the session is established and
// authenticates it with Credentials. The events channel reports every
// later change of the session; the caller must drain it.
func Dial(ctx context.Context, servers string, timeout time.Duration, log *slog.Logger) (*zk.Conn, <-chan zk.Event, error) {
	if log == nil {
		log = slog.Default()
	}
	user, password, authed, err := Credentials()
	if err != nil {
		return nil, nil, err
	}
	conn, events, err := zk.Connect(strings.Split(servers, ","), timeout, zk.WithLogger(logger{log.With("component", "zookeeper")}))
	if err != nil {
		return nil, nil, fmt.Errorf("zookeeper: connect %s: %w", servers, err)
	}
	for {
		select {
		case ev := <-events:
			if ev.State != zk.StateHasSession {
				continue
			}
			if !authed {
				log.Warn("zookeeper: no credentials: offerlog's znodes are open to anyone who reaches the ensemble", "set", AuthEnv)
				return conn, events, nil
			}
			// The session keeps its credentials across reconnections
			// (the client sends them again).
			if err := conn.AddAuth("digest", []byte(user+":"+password)); err != nil {
				conn.Close()
				return nil, nil, fmt.Errorf("zookeeper: authenticate as %s: %w", user, err)
			}
			return conn, events, nil
		case <-ctx.Done():
			conn.Close()
			return nil, nil, fmt.Errorf("zookeeper: connect %s: %w", servers, ctx.Err())
		}
	}
}

type logger struct{ l *slog.Logger }

func (z logger) Printf(format string, args ...any) { z.l.Debug(fmt.Sprintf(format, args...)) }
