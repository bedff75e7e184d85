// Package deploy_test runs what deploy/ ships: the image's build stage,
// replayed layer by layer without a container engine, and the checks of the
// rendered manifests and the alert rules.
package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// repoRoot is the image's build context: the repository (docker build -f
// deploy/Dockerfile .).
const repoRoot = ".."

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is one FROM and the instructions up to the next.
type stage struct {
	from, name string
	steps      []instruction
}

// parseDockerfile reads a Dockerfile's stages: comments and blank lines
// skipped, lines ending in a backslash joined with the next.
func parseDockerfile(t *testing.T, file string) []stage {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		stages  []stage
		pending string
		start   int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending == "" {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, pending = pending+line, ""
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			from, name, _ := strings.Cut(in.args, " AS ")
			if !strings.Contains(in.args, " AS ") {
				from, name, _ = strings.Cut(in.args, " as ")
			}
			stages = append(stages, stage{from: strings.TrimSpace(from), name: strings.TrimSpace(name)})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before FROM", file, start, in.cmd)
		}
		stages[len(stages)-1].steps = append(stages[len(stages)-1].steps, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// contextMatcher is .dockerignore's rules, as Docker applies them
// (moby/patternmatcher, the code Docker's CLI uses).
func contextMatcher(t *testing.T) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatalf("the build context has no .dockerignore: %v", err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

// ignored reports whether the context leaves rel (slash-separated, relative
// to the context's root) out.
func ignored(t *testing.T, pm *patternmatcher.PatternMatcher, rel string) bool {
	t.Helper()
	// MatchesOrParentMatches: a file under an ignored folder is ignored, as
	// in Docker's context walk.
	m, err := pm.MatchesOrParentMatches(rel)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTheBuildContextKeepsSecretsOut checks .dockerignore against the files
// offerlog dev and the tests leave in a work tree: the admin token, the
// Kafka properties with the SASL password, TLS keys, history, binaries and
// node modules stay out; the sources stay in.
func TestTheBuildContextKeepsSecretsOut(t *testing.T) {
	pm := contextMatcher(t)
	for _, rel := range []string{
		"data/admin.token", "data/kafka.properties", "data/tls/server.key", "data/broker/offers-table/0/0.dat",
		".git/config", ".git/objects/ab/cdef", "bin/offerlog", "dist/offerlog-1.0.0-linux-amd64",
		"cmd/offerlog/internal/platform/testdata/kafkajs/node_modules/kafkajs/package.json",
		"cabinet.token", "deploy/secrets/kafka.properties", "tls.key", "ca.pem", "server.crt", "cpu.pprof", "offerlog.test",
	} {
		if !ignored(t, pm, rel) {
			t.Errorf(".dockerignore lets %s into the image's build context", rel)
		}
	}
	for _, rel := range []string{"go.mod", "go.sum", "cmd/offerlog/main.go", "third_party/forked/kfake/cluster.go", "schemas/avro/offer.avsc"} {
		if ignored(t, pm, rel) {
			t.Errorf(".dockerignore leaves %s out of the build context; the build needs it", rel)
		}
	}
}

// TestTheModuleInstallsByVersion checks what go install
// github.com/offerlog/offerlog/cmd/offerlog@VERSION needs of the module: no
// replace or exclude directive (Go refuses to install a module that has
// one) and no other go.mod in the tree (a folder with one is not part of
// the module: the forks would be missing from it), but the bench's: it is
// kept out of the module on purpose (the product requires nothing of it)
// and no package of the binary is in it.
// benchModule is the bench's own module (make bench), not offerlog's.
const benchModule = "cmd/offerlog/internal/bench"

func TestTheModuleInstallsByVersion(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.Dir}}", "../cmd/offerlog").Output()
	if err != nil {
		t.Fatal(err)
	}
	bench, err := filepath.Abs(filepath.Join(repoRoot, benchModule))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range strings.Fields(string(out)) {
		if dir == bench || strings.HasPrefix(dir, bench+string(filepath.Separator)) {
			t.Errorf("the offerlog binary builds %s, in the bench's module", dir)
		}
	}

	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "replace" || f[0] == "exclude") {
			t.Errorf("go.mod:%d: %q: go install ...@VERSION refuses a module with it", i+1, line)
		}
	}
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" && p != filepath.Join(repoRoot, "go.mod") && p != filepath.Join(repoRoot, benchModule, "go.mod") {
			t.Errorf("%s: a nested module; its packages are not part of offerlog's", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTheImageBuildStageBuilds replays deploy/Dockerfile's build stage as
// Docker would, with no container engine: the image's filesystem is an
// empty directory; each COPY puts there exactly what it names from the
// context (.dockerignore honoured), each RUN runs there with the stage's
// ARGs and ENVs, and a failing layer fails the test. The Go toolchain is
// this machine's, checked against the stage's base image. Then every COPY
// --from=build of the later stages must find its source.
func TestTheImageBuildStageBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary from a copy of the context")
	}
	stages := parseDockerfile(t, "Dockerfile")
	if len(stages) < 2 || stages[0].name != "build" {
		t.Fatalf("Dockerfile: want a build stage named build, then the image; got %d stages", len(stages))
	}
	build := stages[0]
	if want := "golang:" + goMinor(runtime.Version()); !strings.HasPrefix(build.from, want) {
		t.Errorf("the build stage's base is %s; the module is tested with %s (want %s...)", build.from, runtime.Version(), want)
	}
	pm := contextMatcher(t)
	root := t.TempDir() // the image's /
	workdir := "/"
	env := map[string]string{}
	buildArgs := map[string]string{"VERSION": "v0.0.0-replay", "COMMIT": "replay"}
	copied := 0
	for _, in := range build.steps {
		where := fmt.Sprintf("Dockerfile:%d: %s", in.line, in.cmd)
		switch in.cmd {
		case "WORKDIR":
			workdir = path.Join(workdir, in.args)
			if err := os.MkdirAll(filepath.Join(root, workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case "ARG":
			name, def, _ := strings.Cut(in.args, "=")
			if v, ok := buildArgs[name]; ok {
				def = v
			}
			env[name] = def
		case "ENV":
			name, val, _ := strings.Cut(in.args, "=")
			env[name] = strings.Trim(val, `"`)
		case "COPY":
			copied += replayCopy(t, where, pm, in.args, root, workdir)
		case "RUN":
			cmd := exec.Command("sh", "-c", in.args)
			cmd.Dir = filepath.Join(root, workdir)
			cmd.Env = os.Environ()
			cmd.Env = append(cmd.Env, "PATH="+goBin(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: the layer fails: %v\n%s", where, in.args, err, out)
			}
			t.Logf("%s %s: ok\n%s", where, in.args, out)
		default:
			t.Fatalf("%s: the replay does not know this instruction in the build stage; teach it", where)
		}
	}
	if copied == 0 {
		t.Fatal("the build stage copied nothing")
	}
	// The image: a static base without a shell (so no RUN), the binary
	// its own health check.
	img := stages[len(stages)-1]
	if !strings.HasPrefix(img.from, "gcr.io/distroless/static") {
		t.Errorf("the image's base is %s, not a static one (distroless/static: no shell, no package manager)", img.from)
	}
	health := false
	for _, in := range img.steps {
		if in.cmd == "RUN" {
			t.Errorf("Dockerfile:%d: RUN in the image: its base has no shell", in.line)
		}
		health = health || in.cmd == "HEALTHCHECK" && strings.HasSuffix(in.args, `CMD ["offerlog", "health"]`)
	}
	if !health {
		t.Error(`the image has no HEALTHCHECK CMD ["offerlog", "health"]`)
	}
	for _, s := range stages[1:] {
		for _, in := range s.steps {
			if in.cmd != "COPY" || !strings.HasPrefix(in.args, "--from=build ") {
				continue
			}
			f := slices.DeleteFunc(strings.Fields(strings.TrimPrefix(in.args, "--from=build ")), func(s string) bool { return strings.HasPrefix(s, "--") })
			for _, src := range f[:len(f)-1] {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("Dockerfile:%d: COPY --from=build %s: the build stage did not make it: %v", in.line, src, err)
				}
			}
		}
	}
}

// replayCopy copies a COPY's sources from the context into the image's
// filesystem at root and returns how many files it copied. A source the
// context leaves out fails, as docker build does.
func replayCopy(t *testing.T, where string, pm *patternmatcher.PatternMatcher, args, root, workdir string) int {
	t.Helper()
	var f []string
	if strings.HasPrefix(args, "[") {
		if err := json.Unmarshal([]byte(args), &f); err != nil {
			t.Fatalf("%s %s: %v", where, args, err)
		}
	} else {
		f = strings.Fields(args)
	}
	if len(f) < 2 || strings.HasPrefix(f[0], "--") {
		t.Fatalf("%s %s: the replay takes COPY SRC... DEST without options in the build stage", where, args)
	}
	srcs, dest := f[:len(f)-1], f[len(f)-1]
	if !path.IsAbs(dest) {
		dest = path.Join(workdir, dest)
	}
	dir := strings.HasSuffix(f[len(f)-1], "/") || len(srcs) > 1 || f[len(f)-1] == "."
	n := 0
	for _, src := range srcs {
		src = path.Clean(src)
		from := filepath.Join(repoRoot, filepath.FromSlash(src))
		info, err := os.Stat(from)
		if err != nil || (src != "." && ignored(t, pm, src)) {
			t.Fatalf("%s %s: %s is not in the build context (missing or .dockerignore'd)", where, args, src)
		}
		if !info.IsDir() {
			to := filepath.Join(root, dest)
			if dir {
				to = filepath.Join(to, path.Base(src))
			}
			copyFile(t, from, to, info.Mode())
			n++
			continue
		}
		err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, p)
			rel = filepath.ToSlash(rel)
			if rel != "." && ignored(t, pm, rel) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			inSrc, _ := filepath.Rel(from, p)
			info, err := d.Info()
			if err != nil {
				return err
			}
			copyFile(t, p, filepath.Join(root, dest, inSrc), info.Mode())
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func copyFile(t *testing.T, from, to string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// goBin is the bin folder of the Go toolchain that runs the tests (go env
// GOROOT), which the RUN layers find first on their PATH.
func goBin(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin")
}

// goMinor is "1.26" of "go1.26.8".
func goMinor(v string) string {
	v = strings.TrimPrefix(v, "go")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
