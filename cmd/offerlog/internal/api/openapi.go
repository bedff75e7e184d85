package api

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPI returns the API's OpenAPI 3.1 description, checked (a test
// checks it against the routes and validates real answers by it).
func OpenAPI() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return doc, nil
}

// serveOpenAPI serves the description as JSON.
func (s *Server) serveOpenAPI() error {
	doc, err := OpenAPI()
	if err != nil {
		return err
	}
	body, err := doc.MarshalJSON()
	if err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	s.route("GET /openapi.json", public, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	return nil
}

// Routes returns the "METHOD /path" of every route the server serves,
// sorted.
func (s *Server) Routes() []string {
	out := append([]string(nil), s.patterns...)
	sort.Strings(out)
	return out
}

// Operations returns the "METHOD /path" of every operation of doc, sorted.
func Operations(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(out)
	return out
}
