package component_test

import (
	"slices"
	"testing"

	"github.com/offerlog/offerlog/streams/component"
)

func TestGrantsAreWhatTheSpecsDeclare(t *testing.T) {
	specs := []component.Spec{
		{Name: "a", Reads: []string{"in"}, Writes: []string{"out", "feed.*"}, Groups: []string{"a"}, Transactional: []string{"a-tx"}},
		{Name: "b", Reads: []string{"in"}, Creates: []string{"new.*"}, Describes: []string{"*"}, GroupPrefixes: []string{"b-"},
			DescribesGroups: []string{"*"}},
	}
	got := component.Grants(specs)
	want := []component.Grant{
		{Resource: component.Topic, Name: "*", Operation: component.Describe},
		{Resource: component.Topic, Name: "*", Operation: component.DescribeConfigs},
		{Resource: component.Topic, Name: "feed.", Prefix: true, Operation: component.Write},
		{Resource: component.Topic, Name: "feed.", Prefix: true, Operation: component.Create},
		{Resource: component.Topic, Name: "feed.", Prefix: true, Operation: component.DescribeConfigs},
		{Resource: component.Topic, Name: "feed.", Prefix: true, Operation: component.AlterConfigs},
		{Resource: component.Topic, Name: "in", Operation: component.Read},
		{Resource: component.Topic, Name: "in", Operation: component.Create},
		{Resource: component.Topic, Name: "in", Operation: component.DescribeConfigs},
		{Resource: component.Topic, Name: "new.", Prefix: true, Operation: component.Create},
		{Resource: component.Topic, Name: "new.", Prefix: true, Operation: component.DescribeConfigs},
		{Resource: component.Topic, Name: "out", Operation: component.Write},
		{Resource: component.Topic, Name: "out", Operation: component.Create},
		{Resource: component.Topic, Name: "out", Operation: component.DescribeConfigs},
		{Resource: component.Topic, Name: "out", Operation: component.AlterConfigs},
		{Resource: component.Group, Name: "*", Operation: component.Describe},
		{Resource: component.Group, Name: "a", Operation: component.Read},
		{Resource: component.Group, Name: "b-", Prefix: true, Operation: component.Read},
		{Resource: component.TransactionalID, Name: "a-tx", Operation: component.Write},
		{Resource: component.Cluster, Name: component.ClusterName, Operation: component.IdempotentWrite},
	}
	if !slices.Equal(got, want) {
		t.Errorf("grants:\n got %v\nwant %v", got, want)
	}
	for topic, used := range map[string]bool{"in": true, "out": true, "feed.x": true, "feed": false, "new.x": false, "other": false} {
		if component.Uses(specs, topic) != used {
			t.Errorf("Uses(%q) = %v, want %v", topic, !used, used)
		}
	}
}
