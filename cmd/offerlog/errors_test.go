package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/topics"
)

// goInternals are words of Go's own error texts that no message of
// offerlog should pass on: they say where the code failed, not what the
// user gave.
var goInternals = regexp.MustCompile(`bufio|runtime\.|json: |Go struct|Go value|strconv\.|reflect\.|\*[a-z]+\.[A-Z][a-zA-Z]+`)

// TestCLIErrorsSayWhy runs what a user gets wrong through every command and
// checks each error names the cause in the user's terms, exit code 1 or 2,
// without Go's own words.
func TestCLIErrorsSayWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "")
	addr := strings.Join(b.Addrs(), ",")
	testkit.EnsureTopics(t, b.Addrs(), topics.Catalogue(2))
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"run", "frobnicator", "--brokers", addr}, "frobnicator"},
		{"", []string{"dev", "--partitions", "x"}, "-partitions"},
		{"", []string{"dev", "--memory", "lots"}, "-memory"},
		{"", []string{"replay", "--brokers", addr, "nosuch"}, "unknown group"},
		{"", []string{"repartition", "--brokers", addr}, "want --to N"},
		{"", []string{"archive", "--brokers", addr}, "want arm"},
		{"", []string{"consume", "--brokers", addr, "nosuch.topic", "--timeout", "1s"}, "nosuch.topic"},
		{`{"key":1,"value":null}` + "\n", []string{"produce", "--brokers", addr, topics.DocumentsIngest}, "key: want a string"},
		{`{"key":"a","value":{"pk":5}}` + "\n", []string{"produce", "--brokers", addr, topics.DocumentsIngest}, "line 1"},
		{"[1,2]\n", []string{"produce", "--brokers", addr, topics.DocumentsIngest}, "want an object"},
		{"{\n", []string{"produce", "--brokers", addr, topics.DocumentsIngest}, "not JSON"},
		{"", []string{"token", "create", "--brokers", addr}, "--admin"},
		{"", []string{"token", "revoke", "--brokers", addr, "nosuch"}, "nosuch"},
		{"", []string{"get", "--hosts", "127.0.0.1:1", "--timeout", "1s"}, "which keys"},
		{"", []string{"numerator", "seal", "--brokers", addr, "x"}, `generation "x"`},
		{"", []string{"deadletters", "list", "--brokers", addr, "nosuch.dead"}, "nosuch.dead"},
		{"", []string{"deploy", "init"}, "--secrets-dir"},
		{"", []string{"topics", "list", "--brokers", addr, "--partitions", "x"}, "-partitions"},
	} {
		start := time.Now()
		code, _, stderr := offerlog(t, c.stdin, c.args...)
		if took := time.Since(start); took > time.Minute {
			t.Errorf("offerlog %v took %v to say what was wrong", c.args, took)
		}
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("offerlog %v: %d %s, want an error naming %q", c.args, code, stderr, c.want)
		}
		if goInternals.MatchString(stderr) {
			t.Errorf("offerlog %v passes on Go's own words: %s", c.args, stderr)
		}
	}
}
