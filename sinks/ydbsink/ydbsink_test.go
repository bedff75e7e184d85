package ydbsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/processors/offers"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/topics"
)

var t0 = time.UnixMilli(1_800_000_000_000).UTC()

func encode[T any](t *testing.T, c *schemas.Codec[T], v *T) []byte {
	t.Helper()
	b, err := c.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRegistryRows(t *testing.T) {
	exp := t0.Add(time.Hour)
	rec := &schemas.RegistryRecord{Client: "shop", PK: "42", Epoch: 2, Version: 7, Timestamp: t0, Status: schemas.StatusTombstone,
		Cause: schemas.CauseIngest, ExpiresAt: &exp, IngestedAt: t0}
	data := encode(t, schemas.RegistryRecords, rec)
	rows, err := Sources[string(topics.RegistryTable)].Map("shop/42", data)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v %v", rows, err)
	}
	v := rows[0].Values
	if v["client"] != "shop" || v["pk"] != "42" || v["epoch"] != int64(2) || v["version"] != int64(7) ||
		v["status"] != StatusTombstone || !v["ttl"].(time.Time).Equal(exp) || v["hash"] != KeyHash("shop/42") || string(v["document"].([]byte)) != string(data) {
		t.Errorf("row %v", v)
	}
	del, _ := Sources[string(topics.RegistryTable)].Map("shop/42", nil)
	if len(del) != 1 || !del[0].Delete || del[0].Values["pk"] != "42" {
		t.Errorf("deletion %v", del)
	}
	if _, err := Sources[string(topics.RegistryTable)].Map("nokey", data); err == nil {
		t.Error("a key without client accepted")
	}
}

func TestOfferRows(t *testing.T) {
	p := int64(5)
	rec := &schemas.OfferRecord{Offer: schemas.Offer{ID: "10000000009", SellerID: "s", Title: "x", Price: &p, Status: schemas.OfferActive},
		Version: 4, Moderation: schemas.Moderation{Banned: true, Reasons: []string{"spam"}}, Billing: schemas.Billing{Tariff: "free"}}
	rows, err := Sources[string(topics.OffersTable)].Map("10000000009", encode(t, schemas.OfferRecords, rec))
	if err != nil || len(rows) != 3 {
		t.Fatalf("%v %v", rows, err)
	}
	kinds := map[string]map[string]any{}
	for _, r := range rows {
		if r.Values["seller_id"] != "s" || r.Values["id"] != "10000000009" || r.Values["version"] != int64(4) {
			t.Errorf("row %v", r.Values)
		}
		kinds[r.Values["kind"].(string)] = r.Values
	}
	var m schemas.Moderation
	if err := json.Unmarshal(kinds[KindModeration]["data"].([]byte), &m); err != nil || !m.Banned {
		t.Errorf("moderation part %s %v", kinds[KindModeration]["data"], err)
	}
	if !strings.Contains(string(kinds[KindOffer]["data"].([]byte)), `"title":"x"`) || kinds[KindBilling] == nil {
		t.Errorf("parts %v", kinds)
	}
}

// TestArchivedOfferRows: an offer's record marked archived deletes its
// rows from offer; offers.archive's record of it writes them to
// offer_archive.
func TestArchivedOfferRows(t *testing.T) {
	rec := &schemas.OfferRecord{Offer: schemas.Offer{ID: "10000000009", SellerID: "s", Title: "x", Status: schemas.OfferSold},
		Version: 7, Archived: true, Billing: schemas.Billing{Tariff: "free", Sold: true}}
	data := encode(t, schemas.OfferRecords, rec)
	rows, err := Sources[string(topics.OffersTable)].Map("10000000009", data)
	if err != nil || len(rows) != 3 {
		t.Fatalf("%v %v", rows, err)
	}
	for _, r := range rows {
		if !r.Delete || r.Table != OfferTable.Name || r.Values["seller_id"] != "s" || r.Values["id"] != "10000000009" || r.Values["kind"] == nil {
			t.Errorf("offers-table's archived record: row %+v, want the deletion of a part", r)
		}
	}
	if rows, err := Sources[string(topics.OffersTable)].Map("10000000009", nil); err != nil || len(rows) != 0 {
		t.Errorf("the tombstone after it: %v %v", rows, err)
	}
	rows, err = Sources[string(topics.OffersArchive)].Map("10000000009", data)
	if err != nil || len(rows) != 3 {
		t.Fatalf("%v %v", rows, err)
	}
	for _, r := range rows {
		if r.Delete || r.Table != OfferArchiveTable.Name || r.Values["version"] != int64(7) || r.Values["data"] == nil {
			t.Errorf("offers.archive: row %+v", r)
		}
	}
}

func TestPresetCabinetAndFeedRows(t *testing.T) {
	key := offers.PresetKey("s", offers.PresetSold, t0, "10000000009")
	rows, err := Sources[string(topics.CabinetPresets)].Map(key, []byte("anything"))
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v %v", rows, err)
	}
	v := rows[0].Values
	if v["seller_id"] != "s" || v["preset_id"] != int32(5) || v["offer_id"] != "10000000009" || v["create_time"] != t0.Format(time.RFC3339Nano) || rows[0].Delete {
		t.Errorf("preset row %v", v)
	}
	if rows, _ := Sources[string(topics.CabinetPresets)].Map(key, nil); !rows[0].Delete {
		t.Error("a tombstone is not a delete")
	}
	if _, err := Sources[string(topics.CabinetPresets)].Map("s/nope/1/2", nil); err == nil {
		t.Error("an unknown preset accepted")
	}

	cab := &schemas.SellerCabinet{SellerID: "s", Presets: schemas.Counts{{Name: "all", Count: 3}, {Name: "active", Count: 2}},
		Active: 2, Banned: 1, Sold: 4, MoneyEarned: 900, Applied: schemas.Counts{{Name: "offers.commands/0", Count: 10}, {Name: "offers.commands/1", Count: 5}}}
	// A part of a spread cabinet (offers.CabinetKey): the seller's id and
	// the part's seq_no, as the seed's user_total_counters has them, so
	// that a query for the seller finds its rows.
	rows, err = Sources[string(topics.CabinetTable)].Map("s/3", encode(t, schemas.SellerCabinets, cab))
	if err != nil || len(rows) != len(offers.Presets)+5 {
		t.Fatalf("%d rows %v", len(rows), err)
	}
	shard := uint32(KeyHash("s") % CounterShards)
	got := map[string]int64{}
	for _, r := range rows {
		if r.Values["version"] != int64(15) {
			t.Errorf("version %v, want the sum of applied offsets 15", r.Values["version"])
		}
		if r.Values["seller_id"] != "s" || r.Values["seq_no"] != int32(3) {
			t.Errorf("%s row of cabinet-table's s/3: seller_id %v, seq_no %v; want s and 3", r.Table, r.Values["seller_id"], r.Values["seq_no"])
		}
		if r.Table == TotalCountersTable.Name && r.Values["shard_id"] != shard {
			t.Errorf("counter row's shard %v, want the seller's %d", r.Values["shard_id"], shard)
		}
		if r.Table == PresetCountsTable.Name {
			got[fmt.Sprint("preset", r.Values["preset_id"])] = r.Values["counter"].(int64)
		} else {
			got[r.Values["counter_id"].(string)] = r.Values["counter_value"].(int64)
		}
	}
	want := map[string]int64{"preset0": 3, "preset1": 2, "preset2": 0, "preset3": 0, "preset4": 0, "preset5": 0,
		"Active": 2, "Expired": 0, "Banned": 1, "Sold": 4, "MoneyEarned": 900}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %d, want %d", k, got[k], w)
		}
	}
	// A cabinet written before the spread, under the bare seller id.
	rows, err = Sources[string(topics.CabinetTable)].Map("s", encode(t, schemas.SellerCabinets, cab))
	if err != nil || rows[0].Values["seller_id"] != "s" || rows[0].Values["seq_no"] != UnspreadSeqNo {
		t.Errorf("the unspread cabinet's row %v (%v), want seller s, seq_no %d", rows[0].Values, err, UnspreadSeqNo)
	}
	// A key that is not the cabinet's seller's is a poison record.
	for _, key := range []string{"t/3", "s/10", "s/x", "s3"} {
		if _, err := Sources[string(topics.CabinetTable)].Map(key, encode(t, schemas.SellerCabinets, cab)); err == nil {
			t.Errorf("cabinet of seller s under key %q accepted", key)
		}
	}

	e := &schemas.FeedEntry{SellerID: "s", ExternalID: "vin/1", OfferID: "10000000009", TaskID: 3}
	rows, err = Sources[string(topics.FeedsIndex)].Map("s/vin/1", encode(t, schemas.FeedEntries, e))
	if err != nil || rows[0].Values["external_id"] != "vin/1" || rows[0].Values["task_id"] != int64(3) {
		t.Errorf("feed row %v %v", rows, err)
	}
}

func TestVersionRule(t *testing.T) {
	o := map[string]any{"epoch": int64(2), "version": int64(5), "modify_timestamp": t0}
	tests := []struct {
		n    map[string]any
		want bool
	}{
		{map[string]any{"epoch": int64(2), "version": int64(6), "modify_timestamp": t0.Add(-time.Hour)}, true},
		{map[string]any{"epoch": int64(3), "version": int64(1), "modify_timestamp": t0}, true},
		{map[string]any{"epoch": int64(2), "version": int64(5), "modify_timestamp": t0.Add(time.Millisecond)}, true},
		{map[string]any{"epoch": int64(2), "version": int64(5), "modify_timestamp": t0}, false}, // a redelivery
		{map[string]any{"epoch": int64(1), "version": int64(9), "modify_timestamp": t0}, false},
		{map[string]any{"epoch": int64(2), "version": int64(4), "modify_timestamp": t0.Add(time.Hour)}, false},
	}
	for i, tt := range tests {
		if got := Newer(RegistryTable, o, tt.n); got != tt.want {
			t.Errorf("case %d: Newer = %v", i, got)
		}
	}
	if !Newer(RegistryTable, nil, o) || !Newer(PresetsTable, map[string]any{}, map[string]any{}) {
		t.Error("a missing row, or a table without versions, must be replaced")
	}
	sql := UpsertSQL(RegistryTable)
	for _, want := range []string{"DECLARE $rows AS List<Struct<hash: Uint64, client: Utf8", "LEFT JOIN `registry` AS o ON o.hash = n.hash AND o.client = n.client AND o.pk = n.pk",
		"WHERE o.hash IS NULL OR (o.epoch < n.epoch) OR (o.epoch = n.epoch AND o.version < n.version) OR (o.epoch = n.epoch AND o.version = n.version AND o.modify_timestamp < n.modify_timestamp)"} {
		if !strings.Contains(sql, want) {
			t.Errorf("upsert lacks %q:\n%s", want, sql)
		}
	}
	if sql := UpsertSQL(PresetsTable); !strings.Contains(sql, "UPSERT INTO `user_offer_presets` SELECT * FROM AS_TABLE($rows)") {
		t.Errorf("versionless upsert:\n%s", sql)
	}
	if sql := DeleteSQL(FeedTable); !strings.Contains(sql, "List<Struct<seller_id: Utf8, external_id: Utf8>>") {
		t.Errorf("delete:\n%s", sql)
	}
	if sql := CreateSQL(FeedTable); !strings.Contains(sql, "CREATE TABLE IF NOT EXISTS `feed`") || !strings.Contains(sql, "PRIMARY KEY (seller_id, external_id)") {
		t.Errorf("create:\n%s", sql)
	}
}

func TestCollapseKeepsTheLastPerKey(t *testing.T) {
	tables := map[string]Table{FeedTable.Name: FeedTable}
	row := func(ext string, task int64, del bool) Row {
		return Row{Table: FeedTable.Name, Delete: del, Values: map[string]any{"seller_id": "s", "external_id": ext, "task_id": task}}
	}
	got := Collapse(tables, []Row{row("a", 1, false), row("b", 1, false), row("a", 2, false), row("b", 0, true)})
	if len(got) != 2 || got[0].Values["task_id"] != int64(2) || !got[1].Delete {
		t.Errorf("%v", got)
	}
}

// memory is a Store in memory with the version rule of YDB's statements.
type memory struct {
	mu    sync.Mutex
	rows  map[string]map[string]map[string]any // table -> key -> values
	fails int                                  // writes to fail before succeeding
}

func (m *memory) Ensure(context.Context, []Table) error { return nil }

func (m *memory) Write(_ context.Context, t Table, rows []Row, deletes bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fails > 0 {
		m.fails--
		return errors.New("transient")
	}
	if m.rows[t.Name] == nil {
		m.rows[t.Name] = map[string]map[string]any{}
	}
	for _, r := range rows {
		k := KeyOf(t, r.Values)
		if deletes {
			delete(m.rows[t.Name], k)
		} else if Newer(t, m.rows[t.Name][k], r.Values) {
			m.rows[t.Name][k] = r.Values
		}
	}
	return nil
}

func (m *memory) get(table, key string) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rows[table][key]
}

// TestSinkFollowsTheTopic runs the sink on the embedded broker: it writes
// rows, retries a failing store without losing anything, applies a newer
// version and ignores an older one, and a restart resumes after what it
// committed.
func TestSinkFollowsTheTopic(t *testing.T) {
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testkit.Context(t, time.Minute)
	feed := func(ext string, task int64) *kgo.Record {
		return &kgo.Record{Topic: string(topics.FeedsIndex), Key: []byte("s/" + ext),
			Value: encode(t, schemas.FeedEntries, &schemas.FeedEntry{SellerID: "s", ExternalID: ext, OfferID: "o-" + ext, TaskID: task})}
	}
	if err := prod.ProduceSync(ctx, feed("a", 1), feed("b", 1), feed("c", 1), &kgo.Record{Topic: string(topics.FeedsIndex), Key: []byte("nokey"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store := &memory{rows: map[string]map[string]map[string]any{}, fails: 2}
	run := func() (stop func()) {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- Run(rctx, Config{Cluster: testkit.Cluster(t, brokers), Source: string(topics.FeedsIndex), Store: store, Logger: testkit.Logger(), MaxBackoff: 100 * time.Millisecond})
		}()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	stop := run()
	key := func(ext string) string { return KeyOf(FeedTable, map[string]any{"seller_id": "s", "external_id": ext}) }
	testkit.Eventually(t, 30*time.Second, "three rows despite two failed writes", func() bool {
		return store.get("feed", key("a")) != nil && store.get("feed", key("b")) != nil && store.get("feed", key("c")) != nil
	})
	stop()

	// Newer task, older task, deletion; the restarted sink picks them up.
	if err := prod.ProduceSync(ctx, feed("a", 3), feed("b", 0), &kgo.Record{Topic: string(topics.FeedsIndex), Key: []byte("s/c")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stop = run()
	defer stop()
	testkit.Eventually(t, 30*time.Second, "the newer row, the older ignored, the deletion", func() bool {
		a, b := store.get("feed", key("a")), store.get("feed", key("b"))
		return a != nil && a["task_id"] == int64(3) && b != nil && b["task_id"] == int64(1) && store.get("feed", key("c")) == nil
	})
	testkit.Eventually(t, 30*time.Second, "the unmappable record dead-lettered", func() bool {
		for _, r := range testkit.ReadAll(t, brokers, topics.OffersDead) {
			var dl schemas.DeadLetter
			if schemas.DeadLetters.Decode(r.Value, &dl) == nil && strings.Contains(dl.Reason, "unmappable") {
				return true
			}
		}
		return false
	})
}

// TestAgainstYDB runs the sink against a real YDB named by OFFERLOG_TEST_YDB
// (grpc://host:2136/local). None can run on the machines this project is
// built on, so it is skipped there, and says so.
func TestAgainstYDB(t *testing.T) {
	dsn := os.Getenv("OFFERLOG_TEST_YDB")
	if dsn == "" {
		t.Skip("SKIPPED: no YDB to test against; set OFFERLOG_TEST_YDB=grpc://host:2136/local to run the sink against one")
	}
	b := testkit.Broker(t, "")
	brokers := b.Addrs()
	testkit.EnsureTopics(t, brokers, topics.Catalogue(2))
	ctx := testkit.Context(t, 2*time.Minute)
	db, err := OpenYDB(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	prod := testkit.Client(t, brokers, kgo.RequiredAcks(kgo.AllISRAcks()))
	seller := fmt.Sprint("ydb-test-", time.Now().UnixNano())
	for task, ext := range []string{"x", "x", "y"} {
		e := &schemas.FeedEntry{SellerID: seller, ExternalID: ext, OfferID: "o", TaskID: int64(task + 1)}
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: string(topics.FeedsIndex), Key: []byte(seller + "/" + ext), Value: encode(t, schemas.FeedEntries, e)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(rctx, Config{Cluster: testkit.Cluster(t, brokers), Source: string(topics.FeedsIndex), Store: db, Logger: testkit.Logger()})
	}()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, time.Minute, "the rows in YDB", func() bool {
		row, err := db.db.Query().QueryRow(ctx, fmt.Sprintf("SELECT COUNT(*) AS n, MAX(task_id) AS task FROM `feed` WHERE seller_id = %q", seller))
		if err != nil {
			return false
		}
		var n uint64
		var task *int64
		if err := row.Scan(&n, &task); err != nil {
			return false
		}
		return n == 2 && task != nil && *task == 3
	})
}
