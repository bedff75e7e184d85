package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/offerlog/offerlog/internal/testkit"
)

// The README's tour, run as a newcomer would: the real binary, `offerlog
// dev` with auth on, and every shell block of the tour and of the Security
// section, in order, through bash. Placeholders (the tour's draft id) take
// the values the platform answers; ports are free ones. A command that
// fails, or a curl answered 401, 403, 404, 405 or 5xx, fails the test.
// Left out, each for its reason: `make run` (the test runs dev itself),
// lines for a production cluster (B, ZK, YDB), a second `offerlog dev`,
// and re-drives of dead letters and stages the tour never makes.

// tourDraft is the draft id the README shows.
const tourDraft = "48215530172"

// tourSkip says why a line of the tour is not run, or "".
func tourSkip(line string) string {
	switch {
	case strings.HasPrefix(line, "make run"):
		return "the test runs offerlog dev itself"
	case strings.HasPrefix(line, "go build"):
		return "the test built bin/offerlog"
	case strings.Contains(line, " B ") || strings.Contains(line, "ZK") || strings.Contains(line, "REGISTRY"):
		return "a production cluster"
	case strings.HasPrefix(line, "bin/offerlog dev"):
		return "a second platform"
	case strings.Contains(line, "redrive"):
		return "the tour makes no dead letter to re-drive"
	case strings.Contains(line, "token revoke"):
		return "the id is an example"
	case strings.Contains(line, "https://localhost"):
		return "TLS needs dev --tls"
	}
	return ""
}

// tourBlocks returns the shell blocks of the README from the tour to the
// topic catalogue, each as its lines.
func tourBlocks(t *testing.T) [][]string {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start, end := strings.Index(text, "## A five-minute tour"), strings.Index(text, "## Topics")
	if start < 0 || end < start {
		t.Fatal("README: no tour")
	}
	var blocks [][]string
	var cur []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(text[start:end]))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```sh":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// tourPrelude makes curl fail on the answers a tour must not get, and
// keeps the body on stdout.
const tourPrelude = `set -eo pipefail
curl() {
  local out code
  out=$(command curl -sS -w '\n%{http_code}' "$@") || return 1
  code=${out##*$'\n'}
  printf '%s\n' "${out%$'\n'*}"
  case $code in 401|403|404|405|5??) echo "HTTP $code from curl $*" >&2; return 1;; esac
}
`

func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the platform and the tour")
	}
	for _, tool := range []string{"bash", "curl", "kcat"} {
		testkit.Tool(t, tool)
	}
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "offerlog"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ports := map[string]string{"8080": freePort(t), "9090": freePort(t), "9091": freePort(t), "9092": freePort(t)}
	var stop func()
	startDev := func() {
		cmd := exec.Command(filepath.Join(dir, "bin", "offerlog"), "dev", "--data", "./data",
			"--http", "127.0.0.1:"+ports["8080"], "--grpc", "127.0.0.1:"+ports["9090"],
			"--cache-grpc", "127.0.0.1:"+ports["9091"], "--kafka-addr", "127.0.0.1:"+ports["9092"])
		cmd.Dir = dir
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, "dev.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "Press Ctrl-C") {
					close(ready)
				}
			}
			_, _ = io.Copy(io.Discard, out)
		}()
		select {
		case <-ready:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatal("offerlog dev did not start")
		}
		stop = func() {
			stop = func() {}
			// Ctrl-C: a clean stop, exit 0.
			_ = cmd.Process.Signal(syscall.SIGINT)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("offerlog dev after Ctrl-C: %v (it must exit 0)", err)
				}
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				t.Errorf("offerlog dev did not stop within a minute of Ctrl-C")
			}
			logf.Close()
		}
	}
	startDev()
	defer func() { stop() }()

	draft := ""
	// The shell's state a newcomer keeps from block to block: the
	// variables the tour sets.
	var state []string
	run := func(lines []string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "export ") || regexp.MustCompile(`^[A-Z_]+=`).MatchString(l) {
				state = append(state, l)
			}
		}
		script := strings.Join(append(append([]string(nil), state...), lines...), "\n")
		for from, to := range ports {
			script = strings.ReplaceAll(script, "localhost:"+from, "127.0.0.1:"+to)
			script = strings.ReplaceAll(script, "127.0.0.1:"+from, "127.0.0.1:"+to)
		}
		if draft != "" {
			script = strings.ReplaceAll(script, tourDraft, draft)
		}
		cmd := exec.Command("bash", "-c", tourPrelude+script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OFFERLOG_HOSTS=127.0.0.1:"+ports["9091"], "OFFERLOG_API=http://127.0.0.1:"+ports["8080"])
		// A command the block left in the background must not hold the
		// output open for ever.
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "dev.log"))
			if len(log) > 4000 {
				log = log[len(log)-4000:]
			}
			t.Fatalf("README tour:\n%s\nfailed: %v\n%s\noffelog dev's log ends:\n%s", script, err, out, log)
		}
		return string(out)
	}
	idOf := regexp.MustCompile(`"id":"(\d{11})"`)
	for _, block := range tourBlocks(t) {
		var lines []string
		for _, l := range block {
			if why := tourSkip(strings.TrimSpace(l)); why != "" {
				t.Logf("skipped (%s): %s", why, l)
				continue
			}
			if strings.Contains(l, "offerlog consume") && !strings.Contains(l, "--timeout") && !strings.Contains(l, "--max") {
				// A watch, which the newcomer stops with Ctrl-C.
				l = strings.Replace(l, "offerlog consume", "offerlog consume --timeout 3s", 1)
			}
			lines = append(lines, l)
		}
		if len(lines) == 0 {
			continue
		}
		if strings.HasPrefix(lines[0], "# restart:") {
			// A restart as the newcomer makes it: the platform stopped and
			// started again on its data, then the block's commands.
			stop()
			startDev()
			run(lines[1:])
			continue
		}
		if strings.Contains(strings.Join(lines, "\n"), "bin/offerlog broker --data") {
			// The replay section runs alone: stop the platform, run it
			// with the broker by itself, start the platform again.
			stop()
			var replay []string
			for _, l := range lines {
				switch {
				case strings.HasPrefix(l, "kill %1"):
					l = "kill -INT %1; wait"
				case strings.HasPrefix(l, "bin/offerlog broker"):
					// On the tour's Kafka port (this test's), and wait
					// until it listens before the next line uses it.
					l = strings.Replace(l, "broker --data ./data", "broker --data ./data --kafka-addr 127.0.0.1:"+ports["9092"], 1)
					replay = append(replay, l, "until (exec 3<>/dev/tcp/127.0.0.1/"+ports["9092"]+") 2>/dev/null; do sleep 0.1; done")
					continue
				}
				replay = append(replay, l)
			}
			lines = replay
			run(lines)
			startDev()
			continue
		}
		// The tour's draft id is the one the platform gives.
		for i, l := range lines {
			if draft == "" && strings.Contains(l, "/v1/drafts/current") {
				out := run(lines[:i+1])
				m := idOf.FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("no draft id in %q", out)
				}
				draft, lines = m[1], lines[i+1:]
				break
			}
		}
		run(lines)
	}
	if draft == "" {
		t.Fatal("the tour made no draft")
	}
}

// TestDocLinksResolve: every relative link of the README and the docs
// names a file of the repository, and an anchor a heading of it (as GitHub
// makes anchors from headings).
func TestDocLinksResolve(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md", "../../deploy/README.md", "../../CHANGELOG.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slug := func(h string) string {
		h = strings.ToLower(strings.TrimSpace(h))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ' || r == '-':
				b.WriteRune('-')
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	anchors := func(path string) map[string]bool {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		out := map[string]bool{}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "#") {
				out[slug(strings.TrimLeft(line, "#"))] = true
			}
		}
		return out
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			full := f
			if path != "" {
				full = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(full); err != nil {
					t.Errorf("%s links to %s, which does not exist", f, target)
					continue
				}
			}
			if anchor != "" && !anchors(full)[anchor] {
				t.Errorf("%s links to %s: no heading makes the anchor #%s", f, target, anchor)
			}
		}
	}
	if checked == 0 {
		t.Error("no link checked")
	}
}

// TestReadmeLayoutListsEveryFolder: every folder of the repository is in
// the README's layout table, by its path, or by its name in its parent's
// row (test data, the forks' insides and the schemas' released copies
// aside).
func TestReadmeLayoutListsEveryFolder(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("the README has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	out, err := exec.Command("git", "-C", "../..", "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dirs := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for d := filepath.Dir(f); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		skip := strings.Contains(d, "testdata") || strings.HasPrefix(d, "schemas/avro") || strings.HasPrefix(d, "schemas/released") ||
			strings.HasPrefix(d, "schemas/proto/") || strings.Count(d, "/") > 2 && strings.HasPrefix(d, "third_party/forked/") ||
			d == "third_party" || d == "processors" || d == "internal" || d == "sinks" || d == "cmd" || d == "docs"
		listed := false
		// By any tail of its path: `deploy/k8s`, `base/kafka`, `.../goka`.
		parts := strings.Split(d, "/")
		for i := range parts {
			tail := strings.Join(parts[i:], "/")
			listed = listed || strings.Contains(layout, "`"+tail+"`") || strings.Contains(layout, "`"+tail+"/") || strings.Contains(layout, "/"+tail+"`")
		}
		if !skip && !listed {
			t.Errorf("the README's layout table does not list %s", d)
		}
	}
}
