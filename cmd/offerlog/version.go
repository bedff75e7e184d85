package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit are set by the Makefile (-ldflags -X); a binary built
// otherwise (go install, go build) takes them from its build information.
var version, commit string

// versionLine returns "offerlog VERSION (commit C, GO)".
func versionLine() string {
	v, c := version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version // a module version for go install, "(devel)" otherwise
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
			if s.Key == "vcs.modified" && s.Value == "true" && commit == "" && c != "" {
				c += "-dirty"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("offerlog %s (commit %s, %s)", v, c, runtime.Version())
}

func printVersion(w io.Writer) { fmt.Fprintln(w, versionLine()) }
