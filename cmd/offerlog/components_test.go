package main

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
)

// handListAt returns the lines of src (Go) that name three components or
// more in code (strings, component constants, processor groups): a list of
// components written by hand, which the specs should give.
func handListAt(src []byte, names []string) []int {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0) // comments skipped
	byLine := map[int]map[string]bool{}
	note := func(pos token.Pos, name string) {
		line := file.Line(pos)
		if byLine[line] == nil {
			byLine[line] = map[string]bool{}
		}
		byLine[line][name] = true
	}
	var prev []string // the last two identifiers, for pkg.Group
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		switch tok {
		case token.STRING:
			v, err := strconv.Unquote(lit)
			if err != nil {
				continue
			}
			for _, w := range regexp.MustCompile(`[a-z][a-z.-]*`).FindAllString(v, -1) {
				if slices.Contains(names, w) {
					note(pos, w)
				}
			}
		case token.IDENT:
			if n, ok := strings.CutPrefix(lit, "Component"); ok && n != "" {
				note(pos, strings.ToLower(n))
			}
			if lit == "Group" && len(prev) == 1 && slices.Contains(names, prev[0]) {
				note(pos, prev[0])
			}
			prev = []string{lit}
			continue
		case token.PERIOD:
			continue
		}
		prev = nil
	}
	var out []int
	for line, named := range byLine {
		if len(named) >= 3 {
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out
}

// TestNoListOfComponentsIsWrittenByHand: the components are declared once,
// each by its spec (a processor package's spec.go, the composition root's
// own in platform/components.go); no Go file of the product lists three of
// them by hand, the run help is derived, the README names none in a list,
// and Prometheus' scrape config names every component and no other.
func TestNoListOfComponentsIsWrittenByHand(t *testing.T) {
	names := platform.AllComponents()
	if got := handListAt([]byte("var x = []string{\"registry\", offers.Group, ComponentCabinet}\n// registry, offers, cabinet\n"), names); !slices.Equal(got, []int{1}) {
		t.Fatalf("the check finds hand lists on lines %v, want [1]", got)
	}
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && rel != ".",
				rel == "third_party", rel == "cmd/offerlog/internal/bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || d.Name() == "spec.go" ||
			rel == "cmd/offerlog/internal/platform/components.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range handListAt(src, names) {
			t.Errorf("%s:%d lists components by hand: derive it from the specs (platform.Specs)", rel, line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`[a-z-]+(\|[a-z-]+){2,}`).FindAllString(string(readme), -1) {
		n := 0
		for _, w := range strings.Split(m, "|") {
			if slices.Contains(names, w) {
				n++
			}
		}
		if n >= 3 {
			t.Errorf("the README lists components by hand: %s", m)
		}
	}
	var prom struct {
		ScrapeConfigs []struct {
			JobName      string `yaml:"job_name"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &prom); err != nil {
		t.Fatal(err)
	}
	var scraped []string
	for _, sc := range prom.ScrapeConfigs {
		for _, d := range sc.DNSSDConfigs {
			scraped = append(scraped, d.Names...)
		}
	}
	want := slices.Sorted(slices.Values(names))
	if slices.Sort(scraped); !slices.Equal(scraped, want) {
		t.Errorf("deploy/prometheus/prometheus.yml scrapes %v, want every component: %v", scraped, want)
	}
}
