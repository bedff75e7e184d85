package zkconn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/internal/zkconn"
)

// TestZnodesAreOfferlogsOwnWithCredentials: with OFFERLOG_ZOOKEEPER_AUTH,
// a znode made with zkconn.ACL by an authenticated session can be neither
// read, changed nor removed by a session without the credentials or with
// others; without them it is anyone's, as before.
func TestZnodesAreOfferlogsOwnWithCredentials(t *testing.T) {
	addr := testkit.ZooKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(auth string) *zk.Conn {
		t.Helper()
		t.Setenv(zkconn.AuthEnv, auth)
		c, _, err := zkconn.Dial(ctx, addr, 10*time.Second, testkit.Logger())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	owner := dial("offerlog:s3cret")
	t.Setenv(zkconn.AuthEnv, "offerlog:s3cret")
	// A znode and its parent (deleting a znode is its parent's
	// permission), as offerlog's root and its lock.
	for _, p := range []string{"/offerlog", "/offerlog/owned"} {
		if _, err := owner.Create(p, []byte("lock"), 0, zkconn.ACL()); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := owner.Get("/offerlog/owned"); err != nil {
		t.Fatalf("the owner reads its znode: %v", err)
	}
	for name, auth := range map[string]string{"no credentials": "", "other credentials": "offerlog:guess"} {
		c := dial(auth)
		if _, _, err := c.Get("/offerlog/owned"); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s: read: %v, want ErrNoAuth", name, err)
		}
		if _, err := c.Set("/offerlog/owned", []byte("mine"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s: set: %v, want ErrNoAuth", name, err)
		}
		if err := c.Delete("/offerlog/owned", -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s: delete: %v, want ErrNoAuth", name, err)
		}
		if _, err := c.Create("/offerlog/owned/child", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s: create under it: %v, want ErrNoAuth", name, err)
		}
	}

	// Without credentials, anyone's.
	t.Setenv(zkconn.AuthEnv, "")
	open := dial("")
	if _, err := open.Create("/open", nil, 0, zkconn.ACL()); err != nil {
		t.Fatal(err)
	}
	if _, err := dial("offerlog:guess").Set("/open", []byte("x"), -1); err != nil {
		t.Errorf("a znode made without credentials: %v, want anyone's", err)
	}

	// Credentials that are not user:password are refused at Dial.
	t.Setenv(zkconn.AuthEnv, "no-colon")
	if _, _, err := zkconn.Dial(ctx, addr, 10*time.Second, testkit.Logger()); err == nil {
		t.Error("credentials without a colon accepted")
	}
}
