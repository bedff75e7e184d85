package main

import (
	"encoding/json"
	"testing"
)

// TestParseFilter: --filter's forms become the API's filters; a form
// without a field, a value or a number where one is needed is refused.
func TestParseFilter(t *testing.T) {
	for in, want := range map[string]string{
		"price>=100":    `{"field":"price","gte":100}`,
		"price>100":     `{"field":"price","gt":100}`,
		"price<=9.5":    `{"field":"price","lte":9.5}`,
		"price<1000":    `{"field":"price","lt":1000}`,
		"tags=bike,car": `{"field":"tags","in":["bike","car"]}`,
		"new=true":      `{"field":"new","in":[true]}`,
		"price=120":     `{"field":"price","in":[120]}`,
	} {
		f, err := parseFilter(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got, _ := json.Marshal(f); string(got) != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"price", "=1", "price>=", "price>=cheap"} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
