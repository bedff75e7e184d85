// Package api is offerlog's HTTP API: the document receiver of the indexing
// pipeline (register epoch schemas, post documents and wait for their
// verdicts, read the registry) plus health and metrics endpoints.
//
// Every write is appended durably (acks=all) to its topic before it is
// answered; a document is answered with the registry's verdict, matched
// on documents.results by the offset the document got (?async=true: 202
// once appended).
package api
