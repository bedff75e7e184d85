// Package offerlog_test holds the module's own checks: the layers its
// folders show, read from every Go file's imports.
package offerlog_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/offerlog/offerlog"

// layers are the module's floors, lowest first: a package stands on its
// own floor and those below, never above (docs/ARCHITECTURE.md, "Layers").
// A folder is on the floor of its longest prefix here; a folder no prefix
// names fails the test until it is placed.
var layers = []struct {
	name     string
	prefixes []string
}{
	{"upstream code carried with patches", []string{"third_party/forked"}},
	{"leaf foundation: metrics, listeners and server TLS, the ZooKeeper connection", []string{"internal/metrics", "internal/listener", "internal/zkconn"}},
	{"wire contracts: schemas and the topic catalogue", []string{"schemas", "topics"}},
	{"the runtime: the consume loop, the table runtime, replay", []string{"streams"}},
	{"test kit and embedded broker", []string{"internal/testkit", "internal/broker"}},
	{"components: processor groups, the serving cache, sinks", []string{"processors", "serving", "sinks"}},
	{"composition root: wiring, the APIs, the console, the bench", []string{"cmd/offerlog/internal"}},
	{"binaries and what ships beside them", []string{"cmd", "deploy"}},
}

// testFloor is the highest floor a test may reach below its package's:
// every test may use the test kit and the embedded broker.
const testFloor = 4

func floor(dir string) (int, bool) {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.prefixes {
			if (dir == p || strings.HasPrefix(dir, p+"/")) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best, best >= 0
}

// TestImportsRunDownTheLayers reads the imports of every Go file of the
// module (tests and every build tag included) and fails on an import from
// a lower floor to a higher one, or a package on no floor.
func TestImportsRunDownTheLayers(t *testing.T) {
	type arrow struct{ from, to, file string }
	var up []arrow
	unplaced := map[string]bool{}
	packages := 0
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", "data", "bin", "dist":
				return filepath.SkipDir
			}
			if path != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			return nil // this test
		}
		if !seen[dir] {
			seen[dir] = true
			packages++
		}
		from, ok := floor(dir)
		if !ok {
			unplaced[dir] = true
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		limit := from
		if strings.HasSuffix(path, "_test.go") {
			limit = max(from, testFloor)
		}
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return err
			}
			if p != module && !strings.HasPrefix(p, module+"/") {
				continue
			}
			target := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
			to, ok := floor(target)
			if !ok {
				unplaced[target] = true
				continue
			}
			if to > limit {
				up = append(up, arrow{dir, target, path})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if packages < 40 {
		t.Fatalf("read %d packages: not the module", packages)
	}
	for dir := range unplaced {
		t.Errorf("%s stands on no floor: place it in layers_test.go's layers", dir)
	}
	sort.Slice(up, func(i, j int) bool { return up[i].file < up[j].file })
	for _, a := range up {
		f, _ := floor(a.from)
		g, _ := floor(a.to)
		t.Errorf("%s imports %s: from %q up to %q", a.file, a.to, layers[f].name, layers[g].name)
	}
}

// TestTheLayerRuleFindsAnArrowUp checks the floors themselves on imports
// that must be refused and allowed.
func TestTheLayerRuleFindsAnArrowUp(t *testing.T) {
	for _, c := range []struct {
		from, to string
		test, ok bool
	}{
		{"streams", "internal/metrics", false, true},
		{"streams", "processors/offers", false, false},
		{"internal/testkit", "processors/cabinet", false, false},
		{"internal/testkit", "streams", false, true},
		{"streams/table", "internal/testkit", true, true},
		{"streams/table", "internal/testkit", false, false},
		{"processors/cabinet", "processors/offers", false, true},
		{"processors/scheduler", "cmd/offerlog/internal/platform", true, false},
		{"serving", "internal/zkconn", false, true},
		{"cmd/offerlog/internal/platform", "processors/offers", false, true},
		{"internal/metrics", "schemas", false, false},
	} {
		from, _ := floor(c.from)
		to, _ := floor(c.to)
		limit := from
		if c.test {
			limit = max(from, testFloor)
		}
		if got := to <= limit; got != c.ok {
			t.Errorf("%s -> %s (test %v): allowed %v, want %v", c.from, c.to, c.test, got, c.ok)
		}
	}
	if _, ok := floor("newfolder/x"); ok {
		t.Error("a folder no layer names has a floor")
	}
}
