package search

import (
	"github.com/offerlog/offerlog/streams/component"
	"github.com/offerlog/offerlog/topics"
)

// Spec is the searcher as the platform registers it (package component).
var Spec = component.Spec{Name: "searcher", User: true, Port: 8092,
	Summary: "indexes every client's search feed (Bleve, per partition) and answers searches: words, filters, kNN",
	Needs:   []string{"auth", "epochs"}, Groups: []string{Group},
	Reads: []string{topics.SaasPrefix + "*"}, Writes: []string{topics.DocumentsDead}, Flags: []component.Flag{
		{Name: "search-wait", Default: DefaultWait.String(), Usage: "longest a search waits for the position it asks to read after (\"after\"), then answers 504"},
		{Name: "search-advertise", Usage: "the URL the API reaches this searcher at (http://HOST:PORT of its --http); the API finds the searcher's members by it in their consumer group"}}}
