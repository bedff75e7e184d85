package serving

import "testing"

func TestStoreHint(t *testing.T) {
	for _, tt := range []struct {
		name    string
		records int64
		want    int
	}{
		{"empty log", 0, 0},
		{"offsets lost by a racing list", -5, 0},
		{"a million records", 1_000_000, 1_000_000},
		{"a log of superseded records", 1 << 40, maxStoreHint},
	} {
		if got := storeHint(tt.records); got != tt.want {
			t.Errorf("%s: storeHint(%d) = %d, want %d", tt.name, tt.records, got, tt.want)
		}
	}
}
