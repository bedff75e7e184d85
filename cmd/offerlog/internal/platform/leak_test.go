package platform_test

import (
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
)

// kafkaGoroutines returns the stacks of the goroutines running the Kafka
// client's code, by goroutine id, but for those of except.
func kafkaGoroutines(except map[string]string) map[string]string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]string{}
	id := regexp.MustCompile(`^goroutine (\d+) `)
	for _, g := range strings.Split(string(buf), "\n\n") {
		if m := id.FindStringSubmatch(g); m != nil && strings.Contains(g, "github.com/twmb/franz-go/pkg/kgo.") && except[m[1]] == "" {
			out[m[1]] = g
		}
	}
	return out
}

// TestAStoppedPlatformLeavesNoKafkaClient: once Run has returned, no
// Kafka client the process made is still running (each dialled its
// brokers for as long as the binary lived: a platform stopped in a test,
// or restarted by its supervisor, kept its clients).
func TestAStoppedPlatformLeavesNoKafkaClient(t *testing.T) {
	before := kafkaGoroutines(nil)
	r := platformtest.Start(t, platformtest.Config(t.TempDir()))
	if len(kafkaGoroutines(before)) == 0 {
		t.Fatal("no goroutine of a Kafka client found while the platform runs: the check sees none")
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	var left map[string]string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if left = kafkaGoroutines(before); len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	var stacks []string
	for _, g := range left {
		stacks = append(stacks, g)
	}
	t.Fatalf("%d goroutines of Kafka clients still run 30 s after the platform stopped:\n%s", len(left), strings.Join(stacks, "\n\n"))
}
