package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// LookTool returns the path of a command `make test` installs (kcat, curl,
// bash), and whether it is there. Without it the test fails when
// OFFERLOG_REQUIRE_KCAT is set (as `make test` sets it); otherwise the
// caller decides what to leave out.
func LookTool(t testing.TB, name string) (string, bool) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("OFFERLOG_REQUIRE_KCAT") != "" {
			t.Fatalf("%s is not installed (make test installs it)", name)
		}
		return "", false
	}
	return path, true
}

// Tool is LookTool for a test that needs the command: without it the test
// is skipped.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, ok := LookTool(t, name)
	if !ok {
		t.Skipf("%s is not installed (make test installs it and runs this)", name)
	}
	return path
}
