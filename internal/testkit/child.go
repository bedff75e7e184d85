package testkit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Child runs the test binary again with only test selected and env added,
// as a process of its own that the test can kill without warning. It
// returns kill, which sends SIGKILL, waits for the process and fails the
// test if the child had failed before it was killed.
func Child(t testing.TB, test string, env ...string) (kill func()) {
	t.Helper()
	_, kill = ChildProcess(t, test, env...)
	return kill
}

// ChildProcess is Child, with the process, for the signals a test sends
// it besides the kill (SIGSTOP, SIGCONT).
func ChildProcess(t testing.TB, test string, env ...string) (proc *os.Process, kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill = func() {
		t.Helper()
		if killed {
			return
		}
		killed = true
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if strings.Contains(out.String(), "--- FAIL") {
			t.Fatalf("%s failed before it was killed:\n%s", test, out.String())
		}
	}
	t.Cleanup(func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd.Process, kill
}
