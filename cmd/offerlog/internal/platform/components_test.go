package platform

import (
	"slices"
	"testing"

	"github.com/offerlog/offerlog/processors/indexer"
	"github.com/offerlog/offerlog/processors/registry"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/streams/component"
)

// TestComponentsAreInDependencyOrder: every component comes after the
// components it needs, every need names a component, names and ports are
// unique (component.Check).
func TestComponentsAreInDependencyOrder(t *testing.T) {
	if err := component.Check(Specs()); err != nil {
		t.Error(err)
	}
	twice := append(Specs(), registry.Spec)
	if err := component.Check(twice); err == nil {
		t.Error("a component registered twice passes the check")
	}
	early := []component.Spec{indexer.Spec, {Name: componentRegistryView}}
	if err := component.Check(early); err == nil {
		t.Error("a component registered before what it needs passes the check")
	}
}

func names(cs []entry) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestPlanStartsWhatIsNeeded(t *testing.T) {
	for _, tt := range []struct {
		selected []string
		http     bool
		want     []string
	}{
		{[]string{ComponentIndexer}, false, []string{componentSchemas, componentRegistryView, ComponentIndexer}},
		{[]string{ComponentNumerator}, true, []string{componentSchemas, ComponentNumerator, componentHTTP}},
		{[]string{ComponentAPI, ComponentRegistry}, true, []string{componentSchemas, componentAuth, componentEpochs, ComponentRegistry, componentRegistryView,
			componentOfferAPI, ComponentAPI, componentHTTP}},
	} {
		if got := names(plan(tt.selected, tt.http)); !slices.Equal(got, tt.want) {
			t.Errorf("plan(%v, http %v) = %v, want %v", tt.selected, tt.http, got, tt.want)
		}
	}
	if got := names(plan(AllComponents(), true)); len(got) != len(components()) {
		t.Errorf("everything selected starts %v, want all %d components", got, len(components()))
	}
}

// TestWhatIsDerivedFromTheList: the metrics ports of `offerlog run`, the
// groups `offerlog replay` knows, and the memory budget all come from the
// one list of components.
func TestWhatIsDerivedFromTheList(t *testing.T) {
	ports := map[string]string{}
	for _, name := range AllComponents() {
		addr := MetricsAddr(name)
		if name == ComponentAPI {
			if addr != "" {
				t.Errorf("the api serves /metrics on its --http, not on %s", addr)
			}
			continue
		}
		if addr == "" {
			t.Errorf("%s has no metrics port of its own", name)
		}
		if other, dup := ports[addr]; dup {
			t.Errorf("%s and %s both default to %s", name, other, addr)
		}
		ports[addr] = name
	}
	want := []string{ComponentRegistry, ComponentIndexer, ComponentNumerator, ComponentOffers, ComponentDrafts, ComponentCabinet, search.Spec.Name}
	if got := Replayable(); !slices.Equal(got, want) {
		t.Errorf("replayable %v, want %v", got, want)
	}
	for _, tt := range []struct {
		components []string
		stores     int
		goMemory   int64
	}{
		{[]string{ComponentCache}, 0, 1000},
		{[]string{ComponentSinkYDB, ComponentLag}, 0, 1000},
		{[]string{ComponentOffers}, 1, 500},
		{[]string{ComponentAPI}, 7, 500}, // the registry's view and the offer API's six (offers.archive's among them)
		{nil, 18, 500},                   // everything
	} {
		selected := tt.components
		if selected == nil {
			selected = AllComponents()
		}
		if got := storesOf(plan(selected, false)); got != tt.stores {
			t.Errorf("%v keep %d stores, want %d", tt.components, got, tt.stores)
		}
		if got := goMemory(Config{Memory: 1000, Components: tt.components}, false); got != tt.goMemory {
			t.Errorf("%v: Go's memory %d of 1000, want %d", tt.components, got, tt.goMemory)
		}
		// Built without cgo, Pebble's caches and memtables are Go heap:
		// the soft limit is the whole budget, whatever the stores.
		if got := goMemory(Config{Memory: 1000, Components: tt.components}, true); got != 1000 {
			t.Errorf("%v, stores on the Go heap: Go's memory %d of 1000, want all of it", tt.components, got)
		}
	}
}
