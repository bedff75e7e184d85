package platform_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform"
	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/schemas"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// kafkajsDir holds the kafkajs user's script and its node modules (make
// tools runs npm ci there).
const kafkajsDir = "testdata/kafkajs"

// TestAKafkajsUser is a user of offerlog with another client and another
// Avro library: kafkajs and @kafkajs/confluent-schema-registry, over SASL
// SCRAM-SHA-512, with the registry client's basic auth. It looks the ingest
// schema up in offerlog's schema registry API, produces a document in
// Confluent framing with kafkajs's partitioner, gets its verdict decoded by
// the registry client, and reads a topic written with each compression codec.
func TestAKafkajsUser(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	node, ok := testkit.LookTool(t, "node")
	if _, err := os.Stat(filepath.Join(kafkajsDir, "node_modules", "kafkajs")); ok && err != nil {
		if os.Getenv("OFFERLOG_REQUIRE_KCAT") != "" {
			t.Fatalf("%s has no node modules (make tools runs npm ci there)", kafkajsDir)
		}
		ok = false
	}
	if !ok {
		t.Skip("node or the kafkajs modules are not installed (make test installs them and runs this)")
	}
	cfg := platformtest.Config(t.TempDir())
	cfg.Insecure = false
	cfg.ExportFraming = schemas.FramingConfluent
	r := platformtest.Start(t, cfg)
	token, err := os.ReadFile(filepath.Join(cfg.DataDir, platform.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	kc, err := streams.LoadKafkaConfig(r.Info.KafkaConfig)
	if err != nil || kc.Credentials == nil {
		t.Fatalf("kafka.properties: %v", err)
	}
	kafka, err := streams.NewCluster(r.Info.Brokers, kc.Credentials, streams.ClientSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	testkit.RegisterEpoch(t, kafka, "shop")

	// One topic per codec, each record written by offerlog's producers
	// with that --compression.
	expect := strings.Repeat("offerlog ", 100)
	var codecTopics []string
	for _, codec := range streams.Compressions {
		topic := "kafkajs-" + codec
		codecTopics = append(codecTopics, topic)
		testkit.EnsureTopics(t, kafka, []topics.Topic{{Name: topic, Partitions: 2}})
		compressed, err := streams.NewCluster(r.Info.Brokers, kc.Credentials, streams.ClientSettings{Compression: codec})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := compressed.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
		compressed.Close()
		if err != nil {
			t.Fatal(err)
		}
		err = cl.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(expect)}).FirstErr()
		cl.Close()
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
	}

	// The writer's schema: offerlog's with a field of its own, which the
	// default BACKWARD level refuses; the subject is set FORWARD as its
	// owner would.
	const subject = topics.DocumentsIngest + "-value"
	cur, err := schemas.Current(schemas.RawDocumentName)
	if err != nil {
		t.Fatal(err)
	}
	var writer map[string]any
	if err := json.Unmarshal([]byte(cur.Text), &writer); err != nil {
		t.Fatal(err)
	}
	writer["fields"] = append(writer["fields"].([]any), map[string]any{"name": "producer_note", "type": "string"})
	writerSchema, _ := json.Marshal(writer)
	req, _ := http.NewRequest("PUT", "http://"+r.Info.HTTPAddr+"/schema-registry/config/"+subject, strings.NewReader(`{"compatibility":"FORWARD"}`))
	req.SetBasicAuth("offerlog", strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("set %s FORWARD: %v %v", subject, resp, err)
	}
	resp.Body.Close()

	cmd := exec.CommandContext(testkit.Context(t, 2*time.Minute), node, "check.js")
	cmd.Dir = kafkajsDir
	cmd.Env = append(os.Environ(),
		"BROKERS="+strings.Join(r.Info.Brokers, ","),
		"SASL_USER="+kc.Credentials.User, "SASL_PASS="+kc.Credentials.Password,
		"REGISTRY=http://"+r.Info.HTTPAddr+"/schema-registry",
		"TOKEN="+strings.TrimSpace(string(token)),
		"PK=js-1", "WRITER_SCHEMA="+string(writerSchema), "CODEC_TOPICS="+strings.Join(codecTopics, ","), "EXPECT="+expect)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the kafkajs user: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var out struct {
		SchemaID     int             `json:"schemaId"`
		RegisteredID int             `json:"registeredId"`
		Verdict      map[string]any  `json:"verdict"`
		Codecs       map[string]bool `json:"codecs"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if out.SchemaID == 0 || out.RegisteredID == 0 || out.RegisteredID == out.SchemaID || out.Verdict["verdict"] != string(schemas.Accepted) || out.Verdict["client"] != "shop" {
		t.Errorf("the kafkajs user's document: latest schema id %d, its own registered as %d, verdict %v", out.SchemaID, out.RegisteredID, out.Verdict)
	}
	for _, topic := range codecTopics {
		if !out.Codecs[topic] {
			t.Errorf("kafkajs did not read %s as written: %v", topic, out.Codecs)
		}
	}
}
