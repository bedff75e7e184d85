package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/internal/zkconn"
	"github.com/offerlog/offerlog/processors/numerator/coordinator"
	"github.com/offerlog/offerlog/processors/numerator/coordinator/coordinatortest"
)

func TestLocal(t *testing.T) {
	coordinatortest.Run(t, func(t *testing.T, clock *coordinatortest.Clock) func() coordinator.Coordinator {
		c := &coordinator.Local{Now: clock.Now}
		return func() coordinator.Coordinator { return c }
	})
}

func TestZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	addr := testkit.ZooKeeper(t)
	// As shipped: every master authenticated, the znodes theirs alone.
	t.Setenv(zkconn.AuthEnv, "offerlog:test")
	n := 0
	coordinatortest.Run(t, func(t *testing.T, clock *coordinatortest.Clock) func() coordinator.Coordinator {
		n++
		root := fmt.Sprintf("/offerlog/test-%d/numerator", n)
		return func() coordinator.Coordinator {
			// Each master has a session of its own, as in another process.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := coordinator.DialZooKeeper(ctx, addr, root, 0, testkit.Logger())
			if err != nil {
				t.Fatal(err)
			}
			c.Now = clock.Now
			t.Cleanup(c.Close)
			return c
		}
	})
}

// silent refuses the lock once, then answers nothing until its caller's
// context ends: an ensemble that stopped answering while a master waited
// for the lock.
type silent struct {
	coordinator.Local
	calls int
}

func (s *silent) Acquire(ctx context.Context, holder string, timeout time.Duration) (coordinator.Lock, error) {
	if s.calls++; s.calls == 1 {
		return coordinator.Lock{}, coordinator.ErrLocked
	}
	<-ctx.Done()
	return coordinator.Lock{}, ctx.Err()
}

// TestAcquireRetryBoundsEachCall: a call of the lock's retry that gets no
// answer fails after the wait given, while the caller's context lives on
// (the sealer's retry ran on its loop's context, without the
// coordinator's wait, and could hang until the process stopped).
func TestAcquireRetryBoundsEachCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &silent{}
	_, err := coordinator.AcquireRetry(ctx, c, "dc-a", time.Minute, time.Millisecond, 50*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || c.calls != 2 {
		t.Fatalf("AcquireRetry: %v after %d calls (caller's context: %v), want the second call's deadline", err, c.calls, ctx.Err())
	}
}
