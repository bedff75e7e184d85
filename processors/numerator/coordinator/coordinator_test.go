package coordinator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
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
