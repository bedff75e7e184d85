package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offerlog/offerlog/internal/broker"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/topics"
)

// TestAMemberKilledWhileJoiningExpires: a member whose process dies while
// it waits in a JoinGroup is kept by the rebalance and given partitions by
// the leader; it must still expire after its session timeout, or its
// partitions are never consumed again. (Kfake patch 5 makes sure it does
// when the broker saw the connection end before its reply; this test
// cannot order that deterministically, and passes on upstream too.)
func TestAMemberKilledWhileJoiningExpires(t *testing.T) {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	testkit.EnsureTopics(t, b.Addrs(), []topics.Topic{{Name: "t", Partitions: 4}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A: a live member.
	a, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond), kgo.RebalanceTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	go func() {
		for ctx.Err() == nil {
			a.PollFetches(ctx)
		}
	}()
	adm, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	members := func() int {
		gs, err := kadm.NewClient(adm).DescribeGroups(ctx, "g")
		if err != nil {
			return -1
		}
		g := gs["g"]
		if g.State != "Stable" {
			return -1
		}
		return len(g.Members)
	}
	testkit.Eventually(t, time.Minute, "one stable member", func() bool { return members() == 1 })

	// B joins with a raw JoinGroup and dies while it waits for the answer.
	bc, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g", 6000, 30000, "consumer"
	for _, name := range []string{"cooperative-sticky", "range"} {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = name
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{"t"}
		p.Metadata = meta.AppendTo(nil)
		join.Protocols = append(join.Protocols, p)
	}
	resp, err := join.RequestWith(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	join.MemberID = resp.MemberID // MEMBER_ID_REQUIRED: join again with it
	go func() { _, _ = join.RequestWith(ctx, bc) }()
	testkit.Eventually(t, time.Minute, "the join waiting in a rebalance", func() bool {
		gs, err := kadm.NewClient(adm).DescribeGroups(ctx, "g")
		return err == nil && gs["g"].State == "PreparingRebalance"
	})
	bc.Close() // the process dies: its connection closes

	// The group may hold the dead member for a while (its session), and
	// must then drop it, whoever led the rebalance.
	closed := time.Now()
	deadline := closed.Add(time.Minute)
	for {
		gs, err := kadm.NewClient(adm).DescribeGroups(ctx, "g")
		if err == nil {
			held := false
			for _, m := range gs["g"].Members {
				held = held || m.MemberID == join.MemberID
			}
			if !held {
				t.Logf("the dead member went %v after its client closed", time.Since(closed).Round(100*time.Millisecond))
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead member %s is still in the group after a minute: %+v %v", join.MemberID, gs["g"], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
