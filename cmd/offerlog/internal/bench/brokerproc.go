package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/offerlog/offerlog/internal/broker"
)

// The environment of a bench process started to serve the embedded broker
// (startBroker): its data directory and largest record batch.
const (
	brokerDirEnv = "OFFERLOG_BENCH_BROKER_DIR"
	brokerMaxEnv = "OFFERLOG_BENCH_BROKER_MAX_RECORD"
)

// ServeBrokerIfAsked is called first by the bench's binaries (and its
// tests' TestMain): in a process startBroker started, it serves the
// embedded broker on its data directory, prints its addresses on a line
// of stdout, and returns true once stdin closes (its parent is gone) or a
// signal comes; elsewhere it returns false at once.
func ServeBrokerIfAsked() bool {
	dir := os.Getenv(brokerDirEnv)
	if dir == "" {
		return false
	}
	maxRecord, _ := strconv.ParseInt(os.Getenv(brokerMaxEnv), 10, 32)
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", DataDir: dir, MaxRecordBytes: int32(maxRecord),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "offerlog-bench broker:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(b.Addrs(), ","))
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-gone:
	case <-sig:
	}
	b.Close()
	return true
}

// startBroker starts the embedded broker on dir in a process of its own
// (this binary again, ServeBrokerIfAsked), as production runs its brokers:
// the scenarios' figures then carry offerlog's heap and GC, not the
// broker's (in process it held every scenario's topics in the bench's
// heap, over its soft limit). stop ends it and waits.
func startBroker(ctx context.Context, dir string, maxRecord int32) (addrs []string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, "-test.run=^$") // a test binary runs no test before TestMain's hook serves
	cmd.Env = append(os.Environ(), brokerDirEnv+"="+dir, brokerMaxEnv+"="+strconv.Itoa(int(maxRecord)))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start the broker's process: %w", err)
	}
	stop = func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		if !ok || l == "" {
			stop()
			return nil, nil, errors.New("the broker's process printed no address")
		}
		return strings.Split(l, ","), stop, nil
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
}
