package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/schemas/proto/stagev1"
)

// timerDelay is the topology's short stage delay: each offer's timer is
// due this long after its creation, so that timers are pending and fire
// through every fault of the run.
const timerDelay = 5 * time.Second

// timerStageName is the stage of due timers the topology runs beside the
// built-in expiry (whose timers, 180 days away, never fire in a test).
const timerStageName = "timer"

// timerStage is an external stage with a short delay, served by the test:
// for a new offer it asks for a timer timerDelay after the offer's
// creation; when the timer fires it saves "fired" in its state. It
// remembers when each offer was processed, the first time at or after its
// due moment, and every Process call that came before it.
type timerStage struct {
	mu    sync.Mutex
	fired map[string]time.Time // offer id → when its timer's Process came
	due   map[string]time.Time // offer id → its due moment
	early int                  // Process calls before the due moment
	calls map[string][]string  // offer id → the calls of its stage, to tell what went wrong
}

// note remembers a call of the stage for offer id (under s.mu).
func (s *timerStage) note(id, format string, args ...any) {
	s.calls[id] = append(s.calls[id], time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (s *timerStage) dueOf(o *schemas.Offer) int64 {
	return o.CreatedAt.Add(timerDelay).UnixMilli()
}

func (s *timerStage) ShouldProcess(_ context.Context, o *schemas.Offer, _ int64, st schemas.StageState) (scheduler.Should, error) {
	due := s.dueOf(o)
	var out scheduler.Should
	switch {
	case string(st.Value) == "fired":
	case due <= time.Now().UnixMilli():
		out.Process = true
	case st.TimerAt == due: // already set
	default:
		out.TimerAt = due
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due[o.ID] = time.UnixMilli(due)
	s.note(o.ID, "ShouldProcess(state %q v%d, timer %d) = %+v", st.Value, st.Version, st.TimerAt, out)
	return out, nil
}

func (s *timerStage) Process(_ context.Context, o *schemas.Offer, _ int64, st schemas.StageState) (scheduler.Result, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note(o.ID, "Process(state %q v%d, timer %d)", st.Value, st.Version, st.TimerAt)
	if now.UnixMilli() < s.dueOf(o) {
		s.early++
		return scheduler.Result{}, nil
	}
	if _, ok := s.fired[o.ID]; !ok {
		s.fired[o.ID] = now
	}
	return scheduler.Result{State: &schemas.StageState{TypeURL: "timer", Value: []byte("fired")}, TimerAt: -1}, nil
}

// serveTimerStage serves the timer stage on the host's address (the pods
// reach it as they reach ZooKeeper) and writes the stages file every
// offerlog process of the run is given (OFFERLOG_STAGES): the built-in
// expiry, as the manifests run it, and the timer stage, asked only of
// status changes (an offer's creation among them).
func (c *cluster) serveTimerStage(t *testing.T) *timerStage {
	ln, err := net.Listen("tcp", net.JoinHostPort(c.net.hostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &timerStage{fired: map[string]time.Time{}, due: map[string]time.Time{}, calls: map[string][]string{}}
	g := grpc.NewServer()
	stagev1.RegisterStageServer(g, scheduler.Serve(s))
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	t.Cleanup(func() { g.Stop(); <-done })
	path := filepath.Join(t.TempDir(), "stages.yaml")
	file := fmt.Sprintf("stages:\n- name: expiry\n  builtin: expiry\n- name: %s\n  address: %s\n  fields: [status]\n  max_parallelism: 8\n",
		timerStageName, ln.Addr())
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	c.extra = map[string]string{"OFFERLOG_STAGES": path}
	return s
}

// checkTimers checks that the timer of every offer the load published
// fired, none before it was due, and logs how late they fired.
func (s *timerStage) check(t *testing.T, l *topologyLoad) {
	l.mu.Lock()
	ids := slices.Collect(maps.Keys(l.offers))
	l.mu.Unlock()
	var missing []string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		missing = missing[:0]
		s.mu.Lock()
		for _, id := range ids {
			if _, ok := s.fired[id]; !ok {
				missing = append(missing, id)
			}
		}
		s.mu.Unlock()
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range missing[:min(5, len(missing))] {
		due, asked := s.due[id]
		_, body, _ := l.call(context.Background(), "GET", "/v1/offers/"+id, "")
		t.Logf("offer %s as the API reads it: %s", id, body)
		for _, p := range l.c.podsOf("scheduler") {
			raw, _ := os.ReadFile(filepath.Join(p.dir, "offerlog.log"))
			for line := range strings.SplitSeq(string(raw), "\n") {
				if strings.Contains(line, id) {
					t.Logf("%s: %s", p.name, line)
				}
			}
		}
		t.Errorf("offer %s: its timer never fired (due %v, the stage asked: %v); its calls:\n%s", id, due.Format("15:04:05.000"), asked,
			strings.Join(s.calls[id], "\n"))
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d offers' timers never fired", len(missing), len(ids))
	}
	var late []time.Duration
	for id, at := range s.fired {
		if due, ok := s.due[id]; ok {
			late = append(late, at.Sub(due))
		}
	}
	slices.Sort(late)
	if len(late) == 0 {
		t.Errorf("no timer fired")
		return
	}
	q := func(p float64) time.Duration { return late[int(p*float64(len(late)-1))].Round(10 * time.Millisecond) }
	t.Logf("topology: %d due timers fired (%d Process calls before their due moment answered nothing); lateness p50 %v, p99 %v, max %v",
		len(late), s.early, q(0.5), q(0.99), late[len(late)-1].Round(10*time.Millisecond))
}
