package streams

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartitionMatchesFranzGo checks that our placement of keys equals
// franz-go's default (Kafka's), and that the goka hasher agrees with both.
func TestPartitionMatchesFranzGo(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, n := range []int32{1, 3, 8, 12} {
		for i := range 2000 {
			key := "client/" + string(rune('a'+i%26)) + string(rune(i))
			want := int32(p.Partition(&kgo.Record{Key: []byte(key)}, int(n)))
			if got := Partition(key, n); got != want {
				t.Fatalf("key %q n %d: Partition %d, franz-go %d", key, n, got, want)
			}
			h := KafkaHasher()()
			h.Write([]byte(key))
			gokaStyle := int32(h.Sum32())
			if gokaStyle < 0 {
				gokaStyle = -gokaStyle
			}
			if got := gokaStyle % n; got != want {
				t.Fatalf("key %q n %d: goka hasher %d, franz-go %d", key, n, got, want)
			}
		}
	}
}

func TestMurmur2KnownValues(t *testing.T) {
	// Values from Kafka's own test of Utils.murmur2.
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := int32(Murmur2([]byte(in))); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}
