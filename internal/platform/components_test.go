package platform

import (
	"slices"
	"testing"
)

// TestComponentsAreInDependencyOrder: every component comes after the
// components it needs, every need names a component, and names are unique.
func TestComponentsAreInDependencyOrder(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range components {
		if seen[c.name] {
			t.Errorf("%s is declared twice", c.name)
		}
		for _, n := range c.needs {
			if !seen[n] {
				t.Errorf("%s needs %s, which is not declared before it", c.name, n)
			}
		}
		seen[c.name] = true
	}
}

func names(cs []component) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.name)
	}
	return out
}

func TestPlanStartsWhatIsNeeded(t *testing.T) {
	for _, tt := range []struct {
		selected []string
		http     bool
		want     []string
	}{
		{[]string{ComponentIndexer}, false, []string{componentRegistryView, ComponentIndexer}},
		{[]string{ComponentNumerator}, true, []string{ComponentNumerator, componentHTTP}},
		{[]string{ComponentAPI, ComponentRegistry}, true, []string{componentAuth, componentEpochs, ComponentRegistry, componentRegistryView,
			componentOfferAPI, ComponentAPI, componentHTTP}},
	} {
		if got := names(plan(tt.selected, tt.http)); !slices.Equal(got, tt.want) {
			t.Errorf("plan(%v, http %v) = %v, want %v", tt.selected, tt.http, got, tt.want)
		}
	}
	if got := names(plan(AllComponents, true)); len(got) != len(components) {
		t.Errorf("everything selected starts %v, want all %d components", got, len(components))
	}
}
