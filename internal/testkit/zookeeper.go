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
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
	})
	deadline := time.Now().Add(90 * time.Second)
	for !ruok(addr) {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logFile.Name())
			t.Fatalf("ZooKeeper exited: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ZooKeeper did not start on %s in 90s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return addr
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
