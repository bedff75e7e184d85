package topics

import (
	"testing"

	"github.com/offerlog/offerlog/schemas"
)

func TestSchemaFor(t *testing.T) {
	tests := []struct {
		topic, want string
		ok          bool
	}{
		{DocumentsIngest, schemas.RawDocumentName, true},
		{Epochs, schemas.EpochSchemaName, true},
		{RegistryTable, schemas.RegistryRecordName, true},
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
