package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/streams"
)

// runSearch searches a client's documents through the API:
//
//	offerlog search CLIENT [WORDS...] [--filter 'price>=100'] [--knn-file F] [--sort price:desc] [--limit N]
//
// and prints the answer, as the API gives it, on stdout.
func runSearch(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	f := newFlags("search", stderr)
	api := f.String("api", "http://127.0.0.1:8080", "the API's URL")
	var filters, sorts []string
	f.Func("filter", "a filter: FIELD=V[,V...] (any of the values: words of a string, a number, true or false), FIELD>=N, FIELD>N, FIELD<=N, FIELD<N; repeat for more", func(s string) error {
		filters = append(filters, s)
		return nil
	})
	f.Func("sort", "sort by FIELD or FIELD:desc (or _score); repeat for more", func(s string) error {
		sorts = append(sorts, s)
		return nil
	})
	knnFile := f.String("knn-file", "", `a JSON file of the kNN: {"field": "vec", "vector": [...], "k": 10}`)
	limit := f.Int("limit", 0, "hits per page (default 20, at most 1000)")
	cursor := f.String("cursor", "", "the previous page's cursor")
	minVersion := f.String("min-version", "", "PK=VERSION: wait until the searcher has applied this version of the document")
	timeout := f.Duration("timeout", 30*time.Second, "how long to wait for the answer")
	token := f.token()
	tlsCA := f.tlsCA("the API's TLS certificate")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() == 0 {
		return fmt.Errorf("%w: whose documents? offerlog search CLIENT [WORDS...]", errUsage)
	}
	q := search.Query{Query: strings.Join(f.Args()[1:], " "), Limit: *limit, Cursor: *cursor}
	for _, s := range filters {
		fl, err := parseFilter(s)
		if err != nil {
			return fmt.Errorf("%w: --filter %q: %v", errUsage, s, err)
		}
		q.Filters = append(q.Filters, fl)
	}
	for _, s := range sorts {
		field, order, _ := strings.Cut(s, ":")
		q.Sort = append(q.Sort, search.Sort{Field: field, Order: order})
	}
	if *knnFile != "" {
		b, err := os.ReadFile(*knnFile)
		if err != nil {
			return err
		}
		q.KNN = &search.KNN{}
		if err := json.Unmarshal(b, q.KNN); err != nil {
			return fmt.Errorf("%w: --knn-file %s: %v", errUsage, *knnFile, err)
		}
	}
	if *minVersion != "" {
		pk, v, ok := strings.Cut(*minVersion, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return fmt.Errorf("%w: --min-version wants PK=VERSION, got %q", errUsage, *minVersion)
		}
		q.MinVersion = &search.PKVersion{PK: pk, Version: n}
	}
	body, err := json.Marshal(q)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: *timeout}
	ca := tlsCA.value
	if strings.HasPrefix(*api, "https:") {
		ca = token.defaultCA(tlsCA, stderr)
	}
	if ca != "" {
		t, err := streams.ClientTLS(ca)
		if err != nil {
			return err
		}
		client.Transport = &http.Transport{TLSClientConfig: t}
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(*api, "/")+"/v1/clients/"+f.Arg(0)+"/search", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if t, err := token.get(); err != nil {
		return err
	} else if t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Field string }
		if json.Unmarshal(out, &e) == nil && e.Error != "" {
			if e.Field != "" {
				return fmt.Errorf("search: %s: %s: %s", resp.Status, e.Field, e.Error)
			}
			return fmt.Errorf("search: %s: %s", resp.Status, e.Error)
		}
		return fmt.Errorf("search: %s", resp.Status)
	}
	_, err = stdout.Write(out)
	return err
}

// parseFilter reads a --filter: FIELD=V[,V...], FIELD>=N, FIELD>N,
// FIELD<=N or FIELD<N.
func parseFilter(s string) (search.Filter, error) {
	for _, op := range []string{">=", "<=", ">", "<", "="} {
		field, v, ok := strings.Cut(s, op)
		if !ok {
			continue
		}
		if field == "" || v == "" {
			return search.Filter{}, fmt.Errorf("want FIELD%sVALUE", op)
		}
		fl := search.Filter{Field: field}
		if op == "=" {
			for _, part := range strings.Split(v, ",") {
				fl.In = append(fl.In, filterValue(part))
			}
			return fl, nil
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fl, fmt.Errorf("%s takes a number, got %q", op, v)
		}
		switch op {
		case ">=":
			fl.Gte = &n
		case ">":
			fl.Gt = &n
		case "<=":
			fl.Lte = &n
		case "<":
			fl.Lt = &n
		}
		return fl, nil
	}
	return search.Filter{}, fmt.Errorf("want FIELD=V, FIELD>=N, FIELD>N, FIELD<=N or FIELD<N")
}

// filterValue is a --filter value as JSON would give it: a boolean, a
// number, else the string.
func filterValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return n
	}
	return s
}
