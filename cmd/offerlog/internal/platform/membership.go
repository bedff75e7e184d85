package platform

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/offerlog/offerlog/streams/component"
)

// leaveGroups takes this process's static members (--instance-id) out of
// the groups of its components when it stops on purpose (its Kafka user
// may not even describe the others). A static member
// that stops does not leave (KIP-345: it is expected back within its
// session, and a restarted one takes its partitions back without a
// rebalance); but a process stopped on purpose may not come back under the
// same name (a Deployment's rollout names new pods), and its partitions
// would wait for its session to end. A process killed never gets here, and
// its restart is the case static membership is for.
func (p *process) leaveGroups(ctx context.Context) {
	id := p.kafka.Settings().InstanceID
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var left []string
	for _, g := range component.GroupsOf(specsOf(plan(p.cfg.Components, false)), component.Instances{Stages: p.cfg.Stages.Names()}) {
		resps, err := p.adm.LeaveGroup(ctx, kadm.LeaveGroup(g).InstanceIDs(id).Reason("offerlog stopped"))
		if err == nil {
			err = resps.Error()
		}
		switch {
		case err == nil:
			left = append(left, g)
		case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.GroupIDNotFound), errors.Is(err, kerr.CoordinatorNotAvailable):
			// Not a member of this group.
		default:
			p.log.Warn("could not leave a group; its partitions wait for the session to end", "group", g, "instance", id, "err", err)
		}
	}
	p.log.Info("left the consumer groups", "instance", id, "groups", left)
}
