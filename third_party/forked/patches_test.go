// Package forked_test checks the forks' bookkeeping: every change to an
// upstream copy under third_party/forked is marked "offerlog patch N" in
// the code and described as entry N of the fork's PATCHES.md, with the
// upstream version, the test that fails without it and when to drop it.
package forked_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	// "offerlog patch 3", "offerlog patches 8 and 10", "offerlog patches 9, 10 and 11"
	markerRE = regexp.MustCompile(`offerlog patch(?:es)? (\d+(?:(?:, | and )\d+)*)`)
	numberRE = regexp.MustCompile(`\d+`)
	// an entry: "N. **title**" at the start of a line
	entryRE   = regexp.MustCompile(`(?m)^(\d+)\. \*\*`)
	versionRE = regexp.MustCompile("(?s)^# .*? at\\s+`v[^`]+`")
)

func TestEveryPatchMarkerHasItsEntryAndTheReverse(t *testing.T) {
	forks, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, fork := range forks {
		if !fork.IsDir() {
			continue
		}
		checked++
		t.Run(fork.Name(), func(t *testing.T) {
			entries := readEntries(t, filepath.Join(fork.Name(), "PATCHES.md"))
			marked := map[int][]string{}
			err := filepath.WalkDir(fork.Name(), func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
					return err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				for i, line := range strings.Split(string(b), "\n") {
					if strings.Contains(line, "offerlog patch") && !markerRE.MatchString(line) {
						t.Errorf("%s:%d: a marker without its entry's number: %q", path, i+1, strings.TrimSpace(line))
					}
					for _, m := range markerRE.FindAllStringSubmatch(line, -1) {
						for _, n := range numberRE.FindAllString(m[1], -1) {
							k, _ := strconv.Atoi(n)
							marked[k] = append(marked[k], path+":"+strconv.Itoa(i+1))
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for n, at := range marked {
				if _, ok := entries[n]; !ok {
					t.Errorf("offerlog patch %d (at %s) has no entry in PATCHES.md", n, strings.Join(at, ", "))
				}
			}
			for n, text := range entries {
				if len(marked[n]) == 0 {
					t.Errorf("PATCHES.md entry %d is marked nowhere in the code", n)
				}
				for _, want := range []string{"Test", "Drop when:"} {
					if !strings.Contains(text, want) {
						t.Errorf("PATCHES.md entry %d does not say %q", n, want)
					}
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no fork found")
	}
}

// readEntries returns PATCHES.md's entries by number, and checks that it
// names the upstream version the fork was copied at.
func readEntries(t *testing.T, path string) map[int]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !versionRE.MatchString(s) {
		t.Errorf("%s does not name the upstream version (\"at `vX`\") before its first entry", path)
	}
	idx := entryRE.FindAllStringSubmatchIndex(s, -1)
	entries := map[int]string{}
	var order []int
	for i, m := range idx {
		n, _ := strconv.Atoi(s[m[2]:m[3]])
		end := len(s)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		if _, dup := entries[n]; dup {
			t.Errorf("%s: entry %d twice", path, n)
		}
		entries[n] = s[m[0]:end]
		order = append(order, n)
	}
	if len(entries) == 0 {
		t.Errorf("%s has no entry", path)
	}
	if !slices.IsSorted(order) {
		t.Errorf("%s: entries out of order: %v", path, order)
	}
	return entries
}
