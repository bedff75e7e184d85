package deploy_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// promtool returns Debian's promtool (make tools installs the prometheus
// package); without it the test is skipped, or fails under
// OFFERLOG_REQUIRE_PROMTOOL (make test sets it).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("OFFERLOG_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is required (make tools installs Debian's prometheus package)")
		}
		t.Skip("no promtool")
	}
	return p
}

// TestAlertRules evaluates the alert rules with Prometheus' own engine:
// promtool checks them and runs their unit tests (alerts_test.yaml: the
// dead-letter alert fires across pods, the lag of many pods counts once,
// a process not scraped pages), and checks the shipped scrape config.
func TestAlertRules(t *testing.T) {
	tool := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(tool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertIsUnitTested: every alert of alerts.yaml is evaluated by
// at least one of alerts_test.yaml's tests (promtool runs them).
func TestEveryAlertIsUnitTested(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("prometheus/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tested := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*alertname:\s*(\S+)`).FindAllStringSubmatch(read("alerts_test.yaml"), -1) {
		tested[m[1]] = true
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert:\s*(\S+)`).FindAllStringSubmatch(read("alerts.yaml"), -1)
	if len(alerts) < 5 {
		t.Fatalf("%d alerts read from alerts.yaml", len(alerts))
	}
	for _, m := range alerts {
		if !tested[m[1]] {
			t.Errorf("alert %s has no unit test in alerts_test.yaml", m[1])
		}
	}
}
