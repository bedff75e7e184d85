package search

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the searcher as the platform registers it (package component).
var Spec = component.Spec{Name: "searcher", User: true, Port: 8092,
	Summary: "indexes every client's search feed (Bleve, per partition) and answers searches: words, filters, kNN",
	Needs:   []string{"auth", "epochs"}, Groups: []string{Group},
	Reads: []string{topics.SaasPrefix + "*"}, Writes: []string{topics.DocumentsDead}, Flags: []string{"search-wait", "search-advertise"}}
