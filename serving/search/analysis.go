package search

import (
	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/char/asciifolding"
	"github.com/blevesearch/bleve/v2/analysis/char/regexp"
	"github.com/blevesearch/bleve/v2/analysis/datetime/flexible"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/lang/ru"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/mapping"

	"github.com/offerlog/offerlog/schemas"
)

// layout is the version of what a partition's index holds and how
// (mapping, field paths, analyzers): an index of another layout is
// rebuilt from the feed when it opens.
const layout = "2"

// The fields of a Bleve document that are the searcher's own, not a
// client's: a client's field names are identifiers without a leading
// underscore (registry.Validate), so they never collide. A client's
// numbers and booleans are indexed at their name; its strings and string
// lists under exactPath (the value as it is: filters and sort) and
// wordsPath (the words, by the field's analyzer).
const (
	fieldVersion = "_version" // the feed's version of the pk
	fieldExpires = "_expires" // Unix milliseconds its TTL ends at (neverExpires: none)
	fieldDoc     = "_doc"     // the document as the hits show it (JSON), stored, not indexed
	exactRoot    = "_k"       // the strings as they are
	wordsRoot    = "_w_"      // + the analyzer: the strings' words
)

// exactPath is where a string field's value is indexed as it is.
func exactPath(field string) string { return exactRoot + "." + field }

// wordsPath is where a string field's words are indexed by analyzer.
func wordsPath(analyzer, field string) string { return wordsRoot + analyzer + "." + field }

// bleveAnalyzer is the Bleve analyzer of each of schemas.Analyzers.
func bleveAnalyzer(name string) string { return "offerlog_" + name }

// Char filters of the analyzers: Latin diacritics fold to ASCII (é is e),
// ё to е (Russian writes both for one letter).
const (
	foldYo          = "offerlog_yo"
	neverDateParser = "offerlog_no_dates"
)

// newMapping is every partition index's mapping: numbers numeric with
// doc values for sorting and booleans at their names, strings under the
// exact and the words roots (mapped as they come, each root with its
// analyzer: a client's fields are those of its epochs, which change), the
// searcher's own explicitly. Nothing goes into Bleve's _all field: a
// query without fields asks each string field with its analyzer.
func newMapping() (mapping.IndexMapping, error) {
	m := bleve.NewIndexMapping()
	m.StoreDynamic = false
	m.IndexDynamic = true
	m.DocValuesDynamic = true
	// A string that reads as a date stays a string (Bleve's dynamic
	// mapping would make it a date, out of reach of words and filters).
	if err := m.AddCustomDateTimeParser(neverDateParser, map[string]any{"type": flexible.Name, "layouts": []any{}}); err != nil {
		return nil, err
	}
	m.DefaultDateTimeParser = neverDateParser
	if err := m.AddCustomCharFilter(foldYo, map[string]any{"type": regexp.Name, "regexp": "[ёЁ]", "replace": "е"}); err != nil {
		return nil, err
	}
	analyzers := map[string][]string{ // the token filters after the tokenizer, by analyzer
		schemas.AnalyzerStandard: {lowercase.Name},
		schemas.AnalyzerEnglish:  {en.PossessiveName, lowercase.Name, en.StopName, en.SnowballStemmerName},
		schemas.AnalyzerRussian:  {lowercase.Name, ru.StopName, ru.SnowballStemmerName},
	}
	doc := bleve.NewDocumentMapping()
	for _, name := range schemas.Analyzers {
		if err := m.AddCustomAnalyzer(bleveAnalyzer(name), map[string]any{"type": custom.Name,
			"char_filters": []any{asciifolding.Name, foldYo}, "tokenizer": unicode.Name, "token_filters": anys(analyzers[name])}); err != nil {
			return nil, err
		}
		words := bleve.NewDocumentMapping()
		words.DefaultAnalyzer = bleveAnalyzer(name)
		doc.AddSubDocumentMapping(wordsRoot+name, words)
	}
	exact := bleve.NewDocumentMapping()
	exact.DefaultAnalyzer = keyword.Name
	doc.AddSubDocumentMapping(exactRoot, exact)
	doc.AddSubDocumentMapping("_all", bleve.NewDocumentDisabledMapping())
	stored := bleve.NewTextFieldMapping()
	stored.Index, stored.Store, stored.IncludeInAll, stored.DocValues = false, true, false, false
	doc.AddFieldMappingsAt(fieldDoc, stored)
	version := bleve.NewNumericFieldMapping()
	version.Store, version.IncludeInAll = true, false
	doc.AddFieldMappingsAt(fieldVersion, version)
	expires := bleve.NewNumericFieldMapping()
	expires.IncludeInAll = false
	doc.AddFieldMappingsAt(fieldExpires, expires)
	m.DefaultMapping = doc
	return m, m.Validate()
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// clientFields are what a client's epochs declare, as a search reads
// them: the latest epoch's type of each field, every analyzer its epochs
// read a string field's words with (a document is indexed by its own
// epoch's: a query asks each), the embeddings' dimensions.
type clientFields struct {
	types      map[string]schemas.FieldType
	analyzers  map[string][]string
	embeddings map[string]int
	// words lists the string fields, in the order of their first
	// declaration: a query without fields asks them all.
	words []string
}

// wordPaths returns the Bleve document paths of the words of a string
// field, with their analyzers, as the documents of its epochs hold them.
func (f *clientFields) wordPaths(field string) [][2]string {
	var out [][2]string
	for _, a := range f.analyzers[field] {
		out = append(out, [2]string{wordsPath(a, field), bleveAnalyzer(a)})
	}
	return out
}
