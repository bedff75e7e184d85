package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/offerlog/offerlog/schemas"
)

var schema = &schemas.EpochSchema{Client: "shop", Epoch: 1, Fields: []schemas.FieldSpec{
	{Name: "title", Type: schemas.TypeString}, {Name: "price", Type: schemas.TypeInt64},
	{Name: "score", Type: schemas.TypeDouble}, {Name: "new", Type: schemas.TypeBool},
	{Name: "tags", Type: schemas.TypeStringList},
}}

func parse(t *testing.T, body string) *DocumentJSON {
	t.Helper()
	var d DocumentJSON
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestToRawDocument(t *testing.T) {
	d := parse(t, `{"pk":"1","version":2,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00.123456Z",
		"fields":{"title":"bike","price":120,"score":4.5,"new":true,"tags":["a"]},"embeddings":{"v":[1,2]}}`)
	doc, fe := toRawDocument(d, schema)
	if fe != nil {
		t.Fatal(fe)
	}
	var names []string
	for _, f := range doc.Fields {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "new,price,score,tags,title" {
		t.Fatalf("fields not sorted: %v", names)
	}
	if doc.Timestamp.Nanosecond() != 123_000_000 {
		t.Fatalf("timestamp not truncated to milliseconds: %v", doc.Timestamp)
	}
	if *doc.Fields[1].Int64 != 120 || *doc.Fields[2].Double != 4.5 || !*doc.Fields[0].Bool {
		t.Fatalf("values: %+v", doc.Fields)
	}
}

func TestToRawDocumentRejects(t *testing.T) {
	tests := []struct{ name, body, field string }{
		{"no pk", `{"version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z"}`, "pk"},
		{"no version", `{"pk":"1","epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z"}`, "version"},
		{"bad action", `{"pk":"1","version":1,"epoch":1,"action":"PATCH","timestamp":"2026-11-01T10:00:00Z"}`, "action"},
		{"bad time", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"today"}`, "timestamp"},
		{"string for int", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":{"price":"1"}}`, "fields.price"},
		{"fraction for int", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":{"price":1.5}}`, "fields.price"},
		{"null value", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":{"title":null}}`, "fields.title"},
		{"list of numbers", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":{"tags":[1]}}`, "fields.tags"},
		{"undeclared", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":{"colour":"red"}}`, "fields.colour"},
		{"huge float", `{"pk":"1","version":1,"epoch":1,"action":"UPSERT","timestamp":"2026-11-01T10:00:00Z","fields":{"title":"x"},"embeddings":{"v":[1e300]}}`, "embeddings.v[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, fe := toRawDocument(parse(t, tt.body), schema)
			if fe == nil || fe.Field != tt.field {
				t.Fatalf("got %v, want an error on %s", fe, tt.field)
			}
		})
	}
}

func TestValidateEpoch(t *testing.T) {
	tests := []struct{ name, body, field string }{
		{"ok", `{"fields":[{"name":"a","type":"string"}],"embeddings":[{"name":"e","dimension":3}]}`, ""},
		{"no fields", `{"fields":[]}`, "fields"},
		{"twice", `{"fields":[{"name":"a","type":"string"},{"name":"a","type":"bool"}]}`, "fields[1].name"},
		{"bad type", `{"fields":[{"name":"a","type":"text"}]}`, "fields[0].type"},
		{"clash", `{"fields":[{"name":"a","type":"string"}],"embeddings":[{"name":"a","dimension":3}]}`, "embeddings[0].name"},
		{"dimension", `{"fields":[{"name":"a","type":"string"}],"embeddings":[{"name":"e","dimension":0}]}`, "embeddings[0].dimension"},
		{"analyzers", `{"analyzer":"russian","fields":[{"name":"a","type":"string","analyzer":"english"},{"name":"t","type":"string_list","analyzer":"standard"}]}`, ""},
		{"epoch analyzer", `{"analyzer":"french","fields":[{"name":"a","type":"string"}]}`, "analyzer"},
		{"field analyzer", `{"fields":[{"name":"a","type":"string","analyzer":"klingon"}]}`, "fields[0].analyzer"},
		{"analyzer of a number", `{"fields":[{"name":"a","type":"string"},{"name":"n","type":"int64","analyzer":"english"}]}`, "fields[1].analyzer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e EpochJSON
			if err := json.Unmarshal([]byte(tt.body), &e); err != nil {
				t.Fatal(err)
			}
			fe := validateEpoch(&e)
			if (fe == nil) != (tt.field == "") || (fe != nil && fe.Field != tt.field) {
				t.Fatalf("got %v, want field %q", fe, tt.field)
			}
		})
	}
}
