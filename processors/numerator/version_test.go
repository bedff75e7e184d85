package numerator

import (
	"strings"
	"testing"
)

func TestUsable(t *testing.T) {
	state := Version{T: 1, S: 2, V: 3, G: 10}
	tests := []struct {
		name string
		data Version
		want bool
	}{
		{"same version", state, true},
		{"older generation", Version{1, 2, 3, 7}, true},
		{"newer generation", Version{1, 2, 3, 11}, false},
		{"other rebuild", Version{1, 2, 2, 7}, false},
		{"other sharding", Version{1, 1, 3, 7}, false},
		{"other type", Version{0, 2, 3, 7}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Usable(tt.data, state); got != tt.want {
				t.Fatalf("Usable(%s, %s) = %v", tt.data, state, got)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion("1.0.12.345")
	if err != nil || v != (Version{1, 0, 12, 345}) || v.String() != "1.0.12.345" {
		t.Fatalf("%v %v", v, err)
	}
	for _, bad := range []string{"", "1.2.3", "1.2.3.4.5", "1.2.x.4", "1.-2.3.4"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCompatibleSaysWhy(t *testing.T) {
	v := func(s string) Version {
		x, err := ParseVersion(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, c := range []struct{ data, state, why string }{
		{"1.0.2.5", "1.0.2.7", ""},
		{"1.0.2.5", "1.0.2.5", ""},
		{"1.0.2.5", "1.0.2.4", "older than the data"},
		{"1.0.2.5", "1.0.3.9", "renumbered"},
		{"1.0.2.5", "1.1.2.9", "shards differ"},
		{"1.0.2.5", "2.0.2.9", "state type"},
	} {
		err := Compatible(v(c.data), v(c.state))
		if (c.why == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.why)) {
			t.Errorf("data %s on state %s: %v, want %q", c.data, c.state, err, c.why)
		}
	}
}
