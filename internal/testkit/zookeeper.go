package testkit

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ZooKeeper starts a ZooKeeper server of its own for the test (Debian's
// zookeeper package, which `make test` installs) on a free port in a
// temporary directory, stops it when the test ends, and returns its
// address. Without the package the test is skipped, or fails when
// OFFERLOG_REQUIRE_ZOOKEEPER is set (as `make test` sets it).
func ZooKeeper(t testing.TB) string {
	t.Helper()
	return ZooKeeperOn(t, "127.0.0.1")
}

// ZooKeeperOn is ZooKeeper listening on the address host (an address other
// network namespaces reach).
func ZooKeeperOn(t testing.TB, host string) string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err == nil {
		_, err = os.Stat("/usr/share/java/zookeeper.jar")
	}
	if err != nil {
		if os.Getenv("OFFERLOG_REQUIRE_ZOOKEEPER") != "" {
			t.Fatalf("ZooKeeper is not installed (make test installs Debian's zookeeper): %v", err)
		}
		t.Skipf("ZooKeeper is not installed (make test installs Debian's zookeeper): %v", err)
	}
	// A server that exits while starting (the port taken between our
	// probe and its bind, by a test running beside) is started again on
	// another port, a few times.
	var failures []string
	for range 3 {
		addr, out, err := startZooKeeper(t, java, host)
		if err == nil {
			return addr
		}
		failures = append(failures, fmt.Sprintf("%v\n%s", err, out))
	}
	t.Fatalf("ZooKeeper did not start:\n%s", strings.Join(failures, "\n---\n"))
	return ""
}

// startZooKeeper starts one ZooKeeper server on host and a free port, and
// waits until it serves; the test's cleanup stops it. An error comes with
// the server's log.
func startZooKeeper(t testing.TB, java, host string) (string, []byte, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%s\n"+
		"clientPortAddress=%s\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n", filepath.Join(dir, "data"), port, host)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(java, "-Xmx256m", "-cp", "/usr/share/java/*:/etc/zookeeper/conf_example",
		"-Dzookeeper.log.dir="+dir, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once the process is waited for, so that the wait
	// below and the cleanup both see it (a value sent once was taken by
	// the first, and the cleanup then waited for ever).
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
	})
	deadline := time.Now().Add(90 * time.Second)
	for !ruok(addr) {
		select {
		case <-exited:
			out, _ := os.ReadFile(logFile.Name())
			return "", out, fmt.Errorf("ZooKeeper exited: %w", waitErr)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logFile.Name())
			return "", out, fmt.Errorf("ZooKeeper did not start on %s in 90s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return addr, nil, nil
}

// ruok asks a ZooKeeper server whether it serves.
func ruok(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		return false
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "imok")
}
