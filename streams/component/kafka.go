package component

import (
	"cmp"
	"slices"
	"strings"
)

// Resource is what a Grant is on, as Kafka's ACLs name it.
type Resource int8

// The resources of Kafka's ACLs a component needs.
const (
	Topic Resource = iota
	Group
	TransactionalID
	Cluster
)

func (r Resource) String() string {
	return [...]string{"topic", "group", "transactional-id", "cluster"}[r]
}

// Operation is what a Grant allows, as Kafka's ACLs name it.
type Operation int8

// The operations of Kafka's ACLs a component needs. In Kafka Read and
// Write imply Describe, AlterConfigs implies DescribeConfigs.
const (
	Read Operation = iota
	Write
	Describe
	Create
	DescribeConfigs
	AlterConfigs
	IdempotentWrite
)

func (o Operation) String() string {
	return [...]string{"Read", "Write", "Describe", "Create", "DescribeConfigs", "AlterConfigs", "IdempotentWrite"}[o]
}

// Grant is one ACL of a component's Kafka user: Op on the resource Name
// (every name that starts with it if Prefix; "*" literal is every one).
type Grant struct {
	Resource  Resource
	Name      string
	Prefix    bool
	Operation Operation
}

// ClusterName is the name Kafka's ACLs give the cluster resource.
const ClusterName = "kafka-cluster"

// Grants returns the ACLs of a user that runs specs, from what they
// declare, sorted and once each:
//
//   - a topic read: Read, and Create and DescribeConfigs (its process
//     ensures the topics it uses: Ensure lists their configs and creates
//     one that is missing);
//   - a topic written: Write, Create, DescribeConfigs and AlterConfigs
//     (Ensure sets an input topic's retention), and IdempotentWrite on the
//     cluster (every producer is idempotent);
//   - a topic created (and not used): Create and DescribeConfigs;
//   - a topic described: Describe and DescribeConfigs (the console shows
//     every topic's retention);
//   - a group: Read (join, commit, fetch its offsets); one described:
//     Describe;
//   - a transactional id: Write; so are a group table's partitions'
//     (topics.Table.Writers).
//
// Nothing on the cluster but IdempotentWrite: no component creates ACLs
// or users, or alters the cluster.
func Grants(specs []Spec) []Grant {
	var out []Grant
	add := func(r Resource, pattern string, ops ...Operation) {
		name, prefix := strings.CutSuffix(pattern, "*")
		if name == "" { // "*": every one, Kafka's literal wildcard
			name, prefix = "*", false
		}
		for _, op := range ops {
			out = append(out, Grant{Resource: r, Name: name, Prefix: prefix, Operation: op})
		}
	}
	for _, s := range specs {
		for _, t := range s.Reads {
			add(Topic, t, Read, Create, DescribeConfigs)
		}
		for _, t := range s.Writes {
			add(Topic, t, Write, Create, DescribeConfigs, AlterConfigs)
		}
		if len(s.Writes) > 0 {
			add(Cluster, ClusterName, IdempotentWrite)
		}
		for _, t := range s.Creates {
			add(Topic, t, Create, DescribeConfigs)
		}
		for _, t := range s.Describes {
			add(Topic, t, Describe, DescribeConfigs)
		}
		for _, g := range s.Groups {
			add(Group, g, Read)
		}
		for _, g := range s.GroupPrefixes {
			add(Group, g+"*", Read)
		}
		for _, g := range s.DescribesGroups {
			add(Group, g, Describe)
		}
		for _, id := range s.Transactional {
			add(TransactionalID, id, Write)
		}
		for _, t := range s.Tables {
			add(TransactionalID, t.Writers()+"*", Write)
		}
	}
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), strings.Compare(a.Name, b.Name),
			compareBool(a.Prefix, b.Prefix), cmp.Compare(a.Operation, b.Operation))
	})
	return slices.Compact(out)
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// Uses reports whether specs read or write the topic: a process ensures
// the catalogue's topics its components use, and only those.
func Uses(specs []Spec, topic string) bool {
	reads, writes := Declares(specs, topic)
	return reads || writes
}

// Declares reports whether specs declare reading and writing the topic.
func Declares(specs []Spec, topic string) (reads, writes bool) {
	for _, s := range specs {
		reads = reads || slices.ContainsFunc(s.Reads, func(p string) bool { return matches(p, topic) })
		writes = writes || slices.ContainsFunc(s.Writes, func(p string) bool { return matches(p, topic) })
	}
	return reads, writes
}

// matches reports whether a topic pattern of a spec names topic.
func matches(pattern, topic string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(topic, prefix)
	}
	return pattern == topic
}
