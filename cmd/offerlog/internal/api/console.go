package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/auth"
	"github.com/offerlog/offerlog/processors/scheduler"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/serving/search"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// The console is the operators' web page at /console: server-rendered
// HTML, no script, readable without JavaScript. It shows the cluster as
// the log tells it: topics, consumer groups and their lag, tables, the
// scheduler's queues and timers, the numerator's generations, and the
// dead letters, with a re-drive button. It serves admins only (it shows
// every client's and seller's data); a browser signs in with a token once,
// kept in an HttpOnly cookie. Its pages are HTML, errors too: the JSON
// API's routes and its OpenAPI description do not include them.

//go:embed console.html
var consoleHTML string

var consoleTemplates = template.Must(template.New("console").Funcs(template.FuncMap{
	"query": url.QueryEscape,
}).Parse(consoleHTML))

// consoleCookie holds a console user's token.
const consoleCookie = "offerlog_console"

// consoleLimit bounds what a page reads of a topic: the timers counted, the
// dead letters and generations shown.
const (
	consoleTimers      = 200_000
	consoleDeadLetters = 50
	consoleGenerations = 20
	consoleReadTimeout = 5 * time.Second
)

func (s *Server) routeConsole() {
	pages := map[string]func(context.Context, *consolePage) error{
		"":           s.consoleOverview,
		"/topics":    s.consoleTopics,
		"/groups":    s.consoleGroups,
		"/tables":    s.consoleTables,
		"/scheduler": s.consoleScheduler,
		"/numerator": s.consoleNumerator,
		"/dead":      s.consoleDead,
		"/search":    s.consoleSearch,
	}
	for path, fill := range pages {
		s.mux.HandleFunc("GET /console"+path, func(w http.ResponseWriter, r *http.Request) {
			if !s.consoleAdmin(w, r) {
				return
			}
			v := r.URL.Query()
			p := &consolePage{Page: strings.TrimPrefix(path, "/"), Insecure: !s.cfg.Auth.Enabled(), Message: v.Get("message"),
				DeadTopic: v.Get("topic"), SearchClient: v.Get("client"), SearchWords: v.Get("q")}
			if p.Page == "" {
				p.Page = "overview"
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*consoleReadTimeout)
			defer cancel()
			if err := fill(ctx, p); err != nil {
				p.Error = err.Error()
			}
			s.consoleRender(w, http.StatusOK, p)
		})
	}
	s.mux.HandleFunc("GET /console/login", func(w http.ResponseWriter, r *http.Request) {
		s.consoleRender(w, http.StatusOK, &consolePage{Page: "login"})
	})
	s.mux.HandleFunc("POST /console/login", s.consoleLogin)
	s.mux.HandleFunc("POST /console/logout", func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			s.consoleRender(w, http.StatusForbidden, &consolePage{Page: "login", Error: "a form of another site"})
			return
		}
		http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/console", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/console/login", http.StatusSeeOther)
	})
	s.mux.HandleFunc("POST /console/dead/redrive", s.consoleRedrive)
}

// consolePage is what the template renders.
type consolePage struct {
	Page, Message, Error string
	Insecure             bool
	Topics               []consoleTopic
	Groups               []consoleGroup
	Stages               []consoleStage
	TimersCounted        int
	TimersCapped         bool
	Numerator            *schemas.NumeratorState
	Generations          []consoleMarker
	DeadTopics           []consoleTopic
	DeadTopic            string
	Letters              []consoleLetter
	// The search page: the clients, the one searched and its words, the
	// answer.
	Clients                   []string
	SearchClient, SearchWords string
	Search                    *search.Result
}

type consoleTopic struct {
	Name, Cleanup, Retention, Doc string
	Partitions                    int
	End, Records                  int64
}

type consoleGroup struct {
	Name, State string
	Members     int
	Lag         int64
	Topics      []consoleLag
}

type consoleLag struct {
	Topic                   string
	Partitions, Lagging     int
	Lag, Committed, EndSums int64
}

type consoleStage struct {
	Name           string
	High, Low      int64
	Timers         int
	NextDue        string
	PushTopic      bool
	QueuedHighEnds int64
}

type consoleMarker struct {
	Offset     int64
	Action     string
	Generation int64
	At         string
}

type consoleLetter struct {
	Partition                 int32
	Offset                    int64
	Topic, Key, Group, Reason string
	SourcePartition           int32
	SourceOffset, Size        int64
	At                        string
	Complete                  bool
}

// consoleAdmin lets an admin through; it sends others to the sign-in page
// (no token) or answers 403 (a token that is not an admin's).
func (s *Server) consoleAdmin(w http.ResponseWriter, r *http.Request) bool {
	if !s.cfg.Auth.Enabled() {
		return true
	}
	credential := r.Header.Get("Authorization")
	if credential == "" {
		if c, err := r.Cookie(consoleCookie); err == nil && c.Value != "" {
			credential = "Bearer " + c.Value
		}
	}
	if credential == "" {
		http.Redirect(w, r, "/console/login", http.StatusSeeOther)
		return false
	}
	sc, err := s.cfg.Auth.Token(credential)
	if err == nil {
		err = sc.CheckAdmin("the console")
	}
	switch {
	case errors.Is(err, auth.ErrForbidden):
		s.consoleRender(w, http.StatusForbidden, &consolePage{Page: "login", Error: err.Error()})
		return false
	case err != nil:
		s.consoleRender(w, http.StatusUnauthorized, &consolePage{Page: "login", Error: err.Error()})
		return false
	}
	return true
}

// crossOrigin is Go's check of cross-site requests (Sec-Fetch-Site, else
// Origin against Host): a form the console takes must come from its own
// pages. Requests of clients that are not browsers carry neither header
// and pass (they send tokens, which a cross-site form cannot).
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin reports whether a form was posted from this site (the cookie
// is SameSite=Strict too).
func sameOrigin(r *http.Request) bool { return crossOrigin.Check(r) == nil }

// viaHTTPS reports whether the client reached the console over HTTPS:
// this listener's TLS, or a TLS-terminating proxy in front of it (the
// shipped Ingress) that says so. Believing the header only ever makes the
// cookie stricter: a browser sends a Secure cookie over HTTPS alone.
func viaHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (s *Server) consoleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !sameOrigin(r) || r.ParseForm() != nil {
		s.consoleRender(w, http.StatusBadRequest, &consolePage{Page: "login", Error: "a sign-in form of another site, or too large"})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	sc, err := s.cfg.Auth.Token("Bearer " + token)
	if err == nil {
		err = sc.CheckAdmin("the console")
	}
	if err != nil {
		status := http.StatusUnauthorized
		if errors.Is(err, auth.ErrForbidden) {
			status = http.StatusForbidden
		}
		s.consoleRender(w, status, &consolePage{Page: "login", Error: err.Error()})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: token, Path: "/console", HttpOnly: true,
		Secure: viaHTTPS(r), SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds())})
	http.Redirect(w, r, "/console", http.StatusSeeOther)
}

func (s *Server) consoleRender(w http.ResponseWriter, status int, p *consolePage) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if err := consoleTemplates.Execute(w, p); err != nil {
		s.cfg.Logger.Warn("console: render", "page", p.Page, "err", err)
	}
}

func (s *Server) consoleOverview(ctx context.Context, p *consolePage) error {
	return errors.Join(s.consoleTopics(ctx, p), s.consoleGroups(ctx, p))
}

// consoleTopics lists every topic of the cluster with its end offsets and
// the records it holds (end minus start offsets).
func (s *Server) consoleTopics(ctx context.Context, p *consolePage) error {
	details, err := s.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	names := details.Names()
	starts, err := s.adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("start offsets: %w", err)
	}
	ends, err := s.adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	configs, _ := s.adm.DescribeTopicConfigs(ctx, names...)
	doc := map[string]string{}
	for _, t := range topics.Catalogue(s.cfg.Partitions) {
		doc[t.Name] = t.Doc
	}
	for _, name := range names {
		t := consoleTopic{Name: name, Partitions: len(details[name].Partitions), Cleanup: "delete", Retention: "broker default", Doc: doc[name]}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == name {
				t.End += o.Offset
				t.Records += o.Offset
			}
		})
		starts.Each(func(o kadm.ListedOffset) {
			if o.Topic == name {
				t.Records -= o.Offset
			}
		})
		if rc, err := configs.On(name, nil); err == nil {
			for _, c := range rc.Configs {
				switch {
				case c.Key == "cleanup.policy" && c.Value != nil:
					t.Cleanup = *c.Value
				case c.Key == "retention.ms" && c.Value != nil:
					t.Retention = retention(*c.Value)
				}
			}
		}
		p.Topics = append(p.Topics, t)
	}
	sort.Slice(p.Topics, func(i, j int) bool { return p.Topics[i].Name < p.Topics[j].Name })
	return nil
}

func retention(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	switch {
	case err != nil:
		return ms
	case n < 0:
		return "forever"
	case n%(24*3600*1000) == 0:
		return fmt.Sprintf("%d days", n/(24*3600*1000))
	}
	return (time.Duration(n) * time.Millisecond).String()
}

// consoleGroups lists every consumer group with its state, members and lag
// per topic.
func (s *Server) consoleGroups(ctx context.Context, p *consolePage) error {
	listed, err := s.adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	groups := listed.Groups()
	if len(groups) == 0 {
		return nil
	}
	described, err := s.adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("describe groups: %w", err)
	}
	lags, err := s.adm.Lag(ctx, groups...)
	if err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	for _, name := range groups {
		g := consoleGroup{Name: name, State: described[name].State, Members: len(described[name].Members)}
		byTopic := map[string]*consoleLag{}
		if l, ok := lags[name]; ok && l.Error() == nil {
			for _, ml := range l.Lag.Sorted() {
				tl := byTopic[ml.Topic]
				if tl == nil {
					tl = &consoleLag{Topic: ml.Topic}
					byTopic[ml.Topic] = tl
				}
				tl.Partitions++
				tl.Lag += max(ml.Lag, 0)
				tl.Committed += max(ml.Commit.At, 0)
				tl.EndSums += ml.End.Offset
				if ml.Lag > 0 {
					tl.Lagging++
				}
			}
		}
		for _, tl := range byTopic {
			g.Lag += tl.Lag
			g.Topics = append(g.Topics, *tl)
		}
		sort.Slice(g.Topics, func(i, j int) bool { return g.Topics[i].Topic < g.Topics[j].Topic })
		p.Groups = append(p.Groups, g)
	}
	sort.Slice(p.Groups, func(i, j int) bool { return p.Groups[i].Name < p.Groups[j].Name })
	return nil
}

// consoleTables lists the compacted topics: the groups' tables and the
// other keyed state, with their sizes in records.
func (s *Server) consoleTables(ctx context.Context, p *consolePage) error {
	if err := s.consoleTopics(ctx, p); err != nil {
		return err
	}
	p.Topics = slices.DeleteFunc(p.Topics, func(t consoleTopic) bool { return !strings.Contains(t.Cleanup, "compact") })
	return nil
}

// consoleScheduler shows each stage's queues (the scheduler's backlog on
// them) and its timers, counted from scheduler.timers.
func (s *Server) consoleScheduler(ctx context.Context, p *consolePage) error {
	details, err := s.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	stages := map[string]*consoleStage{}
	stage := func(name string) *consoleStage {
		if stages[name] == nil {
			stages[name] = &consoleStage{Name: name}
		}
		return stages[name]
	}
	var errs []error
	for _, t := range details.Names() {
		switch {
		case strings.HasPrefix(t, topics.QueuePrefix):
			name, low := strings.CutSuffix(strings.TrimPrefix(t, topics.QueuePrefix), ".low")
			backlog, err := streams.Backlog(ctx, s.adm, scheduler.Group(name, low), t)
			if err != nil {
				errs = append(errs, err)
			}
			if low {
				stage(name).Low = backlog
			} else {
				stage(name).High = backlog
			}
		case strings.HasPrefix(t, topics.PushPrefix):
			stage(strings.TrimPrefix(t, topics.PushPrefix)).PushTopic = true
		}
	}
	// Timers: the last record of each key that is not a tombstone.
	live := map[string]schemas.StageTimer{}
	rctx, cancel := context.WithTimeout(ctx, consoleReadTimeout)
	defer cancel()
	err = streams.ReadToEnd(rctx, s.cfg.Cluster, topics.SchedulerTimers, func(r *kgo.Record) {
		p.TimersCounted++
		if p.TimersCounted > consoleTimers {
			p.TimersCapped = true
			return
		}
		var tm schemas.StageTimer
		if r.Value == nil || schemas.StageTimers.Decode(r.Value, &tm) != nil {
			delete(live, string(r.Key))
			return
		}
		live[string(r.Key)] = tm
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		errs = append(errs, fmt.Errorf("timers: %w", err))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		p.TimersCapped = true
	}
	next := map[string]int64{}
	for _, tm := range live {
		st := stage(tm.Stage)
		st.Timers++
		if n, ok := next[tm.Stage]; !ok || tm.DueAt < n {
			next[tm.Stage] = tm.DueAt
		}
	}
	for name, due := range next {
		stage(name).NextDue = time.UnixMilli(due).UTC().Format(time.RFC3339)
	}
	for _, st := range stages {
		p.Stages = append(p.Stages, *st)
	}
	sort.Slice(p.Stages, func(i, j int) bool { return p.Stages[i].Name < p.Stages[j].Name })
	return errors.Join(errs...)
}

// consoleNumerator shows the numerator's last state and its last
// generation markers.
func (s *Server) consoleNumerator(ctx context.Context, p *consolePage) error {
	kafka := s.cfg.Cluster
	var errs []error
	// The last state among the last records: a refused build's record
	// (Invalid) is no state.
	err := s.readLast(ctx, kafka, topics.NumeratorStates, 10, func(r *kgo.Record) {
		var st schemas.NumeratorState
		if schemas.NumeratorStates.Decode(r.Value, &st) == nil && st.Invalid == "" {
			p.Numerator = &st
		}
	})
	errs = append(errs, err)
	err = s.readLast(ctx, kafka, topics.NumeratorGenerations, consoleGenerations, func(r *kgo.Record) {
		var m schemas.GenerationMarker
		if schemas.GenerationMarkers.Decode(r.Value, &m) == nil {
			p.Generations = append(p.Generations, consoleMarker{Offset: r.Offset, Action: string(m.Action), Generation: m.Generation,
				At: r.Timestamp.UTC().Format(time.RFC3339)})
		}
	})
	slices.Reverse(p.Generations)
	return errors.Join(append(errs, err)...)
}

// readLast calls fn with the last n records of each partition of topic.
func (s *Server) readLast(ctx context.Context, kafka *streams.Cluster, topic string, n int64, fn func(*kgo.Record)) error {
	starts, err := s.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("%s: %w", topic, err)
	}
	ends, err := s.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("%s: %w", topic, err)
	}
	from, to := map[int32]int64{}, map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		start, _ := starts.Lookup(o.Topic, o.Partition)
		from[o.Partition], to[o.Partition] = max(o.Offset-n, start.Offset, 0), o.Offset
	})
	rctx, cancel := context.WithTimeout(ctx, consoleReadTimeout)
	defer cancel()
	if err := streams.ReadRange(rctx, kafka, topic, from, to, fn); err != nil {
		return fmt.Errorf("%s: %w", topic, err)
	}
	return nil
}

// deadTopics are the dead-letter topics of the catalogue.
// consoleDead lists the dead-letter topics with their sizes and, for the
// one asked for (?topic=), its last dead letters.
func (s *Server) consoleDead(ctx context.Context, p *consolePage) error {
	if err := s.consoleTopics(ctx, p); err != nil {
		return err
	}
	for _, t := range p.Topics {
		if slices.Contains(topics.DeadLetterTopics(), t.Name) {
			p.DeadTopics = append(p.DeadTopics, t)
		}
	}
	p.Topics = nil
	if p.DeadTopic == "" {
		return nil
	}
	if !slices.Contains(topics.DeadLetterTopics(), p.DeadTopic) {
		return fmt.Errorf("%q is not a dead-letter topic", p.DeadTopic)
	}
	err := s.readLast(ctx, s.cfg.Cluster, p.DeadTopic, consoleDeadLetters, func(r *kgo.Record) {
		var d schemas.DeadLetter
		if schemas.DeadLetters.Decode(r.Value, &d) != nil {
			return
		}
		p.Letters = append(p.Letters, consoleLetter{Partition: r.Partition, Offset: r.Offset, Topic: d.Topic, Key: string(d.Key),
			Group: d.Group, Reason: d.Reason, SourcePartition: d.Partition, SourceOffset: d.Offset, Size: d.ValueSize,
			At: d.Timestamp.UTC().Format(time.RFC3339), Complete: d.Complete()})
	})
	sort.Slice(p.Letters, func(i, j int) bool { return p.Letters[i].At > p.Letters[j].At })
	return err
}

// consoleSearch searches a client's documents by words (GET form: the
// client and the words in the URL).
func (s *Server) consoleSearch(ctx context.Context, p *consolePage) error {
	p.Clients = s.cfg.Epochs.Clients()
	if p.SearchClient == "" || p.SearchWords == "" {
		return nil
	}
	if s.cfg.Search == nil {
		return errors.New("no searcher")
	}
	res, err := s.cfg.Search.Search(ctx, p.SearchClient, search.Query{Query: p.SearchWords, Limit: 50})
	if err != nil {
		return err
	}
	p.Search = res
	return nil
}

// consoleRedrive puts one dead letter back on its topic (admin only, a
// form of this site).
func (s *Server) consoleRedrive(w http.ResponseWriter, r *http.Request) {
	if !s.consoleAdmin(w, r) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !sameOrigin(r) || r.ParseForm() != nil {
		s.consoleRender(w, http.StatusBadRequest, &consolePage{Page: "dead", Error: "a form of another site, or too large"})
		return
	}
	topic := r.PostForm.Get("topic")
	partition, err1 := strconv.ParseInt(r.PostForm.Get("partition"), 10, 32)
	offset, err2 := strconv.ParseInt(r.PostForm.Get("offset"), 10, 64)
	if !slices.Contains(topics.DeadLetterTopics(), topic) || err1 != nil || err2 != nil || partition < 0 || offset < 0 {
		s.consoleRender(w, http.StatusBadRequest, &consolePage{Page: "dead", Error: "want a dead-letter topic, a partition and an offset"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*consoleReadTimeout)
	defer cancel()
	var letter *schemas.DeadLetter
	err := streams.ReadRange(ctx, s.cfg.Cluster, topic,
		map[int32]int64{int32(partition): offset}, map[int32]int64{int32(partition): offset + 1}, func(rec *kgo.Record) {
			var d schemas.DeadLetter
			if rec.Offset == offset && schemas.DeadLetters.Decode(rec.Value, &d) == nil {
				letter = &d
			}
		})
	if err == nil && letter == nil {
		err = fmt.Errorf("no dead letter at %s partition %d offset %d", topic, partition, offset)
	}
	if err == nil {
		err = s.redrive(ctx, letter)
	}
	msg := fmt.Sprintf("re-driven: %s partition %d offset %d is back on its topic", topic, partition, offset)
	if err != nil {
		msg = "not re-driven: " + err.Error()
	}
	http.Redirect(w, r, "/console/dead?topic="+url.QueryEscape(topic)+"&message="+url.QueryEscape(msg), http.StatusSeeOther)
}

// redrive puts d's record back on its topic and partition, as it was.
func (s *Server) redrive(ctx context.Context, d *schemas.DeadLetter) error {
	rec, err := streams.RedriveRecord(d)
	if err != nil {
		return err
	}
	prod, err := s.cfg.Cluster.Producer("console", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer prod.Close()
	return prod.ProduceSync(ctx, rec).FirstErr()
}
