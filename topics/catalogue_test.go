package topics

import (
	"slices"
	"testing"
	"time"

	"github.com/offerlog/offerlog/schemas"
)

func TestSchemaFor(t *testing.T) {
	tests := []struct {
		topic, want string
		ok          bool
	}{
		{DocumentsIngest, schemas.RawDocumentName, true},
		{Epochs, schemas.EpochSchemaName, true},
		{string(RegistryTable), schemas.RegistryRecordName, true},
		{"saas.shop", schemas.SaasDocumentName, true},
		{"yt.shop-2", schemas.YtRecordName, true},
		{"saas.", "", false},
		{"yt.Bad!", "", false},
		{"elsewhere", "", false},
	}
	for _, tt := range tests {
		got, ok := SchemaFor(tt.topic)
		if got != tt.want || ok != tt.ok {
			t.Errorf("SchemaFor(%q) = %q, %v; want %q, %v", tt.topic, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCatalogueIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, tp := range append(Catalogue(8), ForClient("shop", 8)...) {
		if seen[tp.Name] {
			t.Errorf("%s listed twice", tp.Name)
		}
		seen[tp.Name] = true
		if _, err := schemas.Current(tp.Schema); err != nil {
			t.Errorf("%s: %v", tp.Name, err)
		}
		if tp.Partitions < 1 || tp.Doc == "" {
			t.Errorf("%s: partitions %d, doc %q", tp.Name, tp.Partitions, tp.Doc)
		}
	}
	c := Topic{Name: "x", Compacted: true, Retention: Forever}.Configs()
	if c["cleanup.policy"] != "compact" || c["retention.ms"] != "-1" {
		t.Errorf("configs %v", c)
	}
}

func TestValidateClient(t *testing.T) {
	for _, ok := range []string{"shop", "a", "shop_2", "x-y"} {
		if err := ValidateClient(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Shop", "-x", "a.b", "a/b", string(make([]byte, 64))} {
		if ValidateClient(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestInputRetentionBoundsTheReplayInputs: --input-retention sets the
// retention of every replay input, the offers' commands among them, and of
// nothing else; none of them is compacted (a retention would not bound it).
func TestInputRetentionBoundsTheReplayInputs(t *testing.T) {
	const d = 30 * 24 * time.Hour
	before := Catalogue(8)
	after := WithInputRetention(before, d)
	for i, tp := range after {
		input := slices.Contains(ReplayInputs, tp.Name)
		switch {
		case input && (tp.Retention != d || tp.Compacted):
			t.Errorf("%s: retention %v, compacted %v; want %v, not compacted", tp.Name, tp.Retention, tp.Compacted, d)
		case !input && tp.Retention != before[i].Retention:
			t.Errorf("%s is not a replay input, and its retention moved to %v", tp.Name, tp.Retention)
		case input && before[i].Retention != Forever:
			t.Errorf("%s: a replay input the catalogue does not keep for ever (%v)", tp.Name, before[i].Retention)
		}
	}
	for _, name := range []string{OffersCommands, DraftsCommands, CabinetChanges} {
		if !slices.Contains(ReplayInputs, name) {
			t.Errorf("%s is not bounded by --input-retention", name)
		}
	}
}
