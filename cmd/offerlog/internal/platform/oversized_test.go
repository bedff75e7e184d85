package platform_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offerlog/offerlog/cmd/offerlog/internal/platform/platformtest"
	"github.com/offerlog/offerlog/internal/testkit"
	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/topics"
)

// TestWaitAnswersNextToAnOversizedRecord: a 5 MB undecodable record reaches
// documents.ingest (from a producer of a cluster that takes such records);
// the registry dead-letters it bounded and goes on, and a document posted
// with ?wait=true to the same partition right after is answered within
// 2 s. A document over the API's limit is refused with 413.
func TestWaitAnswersNextToAnOversizedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b := testkit.Broker(t, "") // takes records far larger than offerlog's 1 MiB
	cfg := platformtest.Config(t.TempDir())
	cfg.Brokers = b.Addrs()
	r := platformtest.Start(t, cfg)
	base := "http://" + r.Info.HTTPAddr
	s, body := call(t, "PUT", base+"/v1/clients/shop/epochs/1", epochBody)
	expect(t, "register epoch", s, body, http.StatusCreated, `"epoch":1`)

	cl := testkit.Client(t, b.Addrs(), kgo.ProducerBatchMaxBytes(8<<20))
	big := bytes.Repeat([]byte{0xC3}, 5<<20)
	if err := cl.ProduceSync(testkit.Context(t, time.Minute), &kgo.Record{Topic: topics.DocumentsIngest, Key: []byte("shop/big"), Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A document on the same partition, posted at once.
	want := streams.Partition("shop/big", cfg.Partitions)
	pk := ""
	for i := 0; pk == ""; i++ {
		if streams.Partition(fmt.Sprint("shop/", i), cfg.Partitions) == want {
			pk = fmt.Sprint(i)
		}
	}
	start := time.Now()
	s, body = call(t, "POST", base+"/v1/clients/shop/documents?wait=true", docBody(pk, 1, ""))
	took := time.Since(start)
	expect(t, "a document behind the oversized record", s, body, http.StatusOK, `"verdict":"ACCEPTED"`)
	if took > 2*time.Second {
		t.Errorf("?wait=true answered after %v behind an oversized record, want within 2 s", took)
	}
	testkit.Eventually(t, 30*time.Second, "the oversized record's bounded dead letter", func() bool {
		for _, d := range testkit.ReadAll(t, b.Addrs(), topics.DocumentsDead) {
			if len(d.Value) < 100<<10 && string(d.Key) == "shop/big" {
				return true
			}
		}
		return false
	})
	s, body = call(t, "POST", base+"/v1/clients/shop/documents?wait=true",
		docBody("huge", 1, fmt.Sprintf(`,"tags2":%q`, string(bytes.Repeat([]byte("x"), 2<<20)))))
	expect(t, "a document over the limit", s, body, http.StatusRequestEntityTooLarge, "larger than")
}
