package schemas

import (
	"strings"
	"testing"
)

func TestCheckKey(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"sku-1", true},
		{"товар/42 ✓", true},
		{strings.Repeat("a", MaxKeyBytes), true},
		{strings.Repeat("a", MaxKeyBytes+1), false},
		{"", false},
		{"a\xffb", false},
		{"a\uFFFDb", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\u0085b", false}, // C1 control
	} {
		err := CheckKey(c.key)
		if (err == nil) != c.ok {
			t.Errorf("CheckKey(%q) = %v, want ok %v", c.key, err, c.ok)
		}
	}
}
