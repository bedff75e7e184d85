package table_test

import (
	"fmt"
	"strconv"

	"github.com/offerlog/offerlog/streams"
	"github.com/offerlog/offerlog/streams/table"
)

// A processor in goka's model: a group whose table counts the records of
// each key and which emits the count. The Tester runs its callback without
// a broker; Graph.Run runs the same graph on a cluster.
func ExampleTester() {
	g := &table.Graph{
		Group: "counter",
		Codec: streams.Bytes{},
		Inputs: []table.Input{{Topic: "clicks", Callback: func(ctx table.Context, _ []byte) {
			n := 0
			if v, ok := ctx.Value().([]byte); ok {
				n, _ = strconv.Atoi(string(v))
			}
			n++
			ctx.SetValue([]byte(strconv.Itoa(n)))
			ctx.Emit("counts", ctx.Key(), []byte(strconv.Itoa(n)))
		}}},
		Outputs: []table.Output{{Topic: "counts", Codec: streams.Bytes{}}},
	}
	tt := table.NewTester(g)
	for _, user := range []string{"ann", "bob", "ann"} {
		out, err := tt.Consume("clicks", 0, user, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s -> %s: %s\n", user, out[0].Topic, out[0].Value)
	}
	fmt.Printf("table: ann=%s bob=%s\n", tt.Value("ann"), tt.Value("bob"))
	// Output:
	// ann -> counts: 1
	// bob -> counts: 1
	// ann -> counts: 2
	// table: ann=2 bob=1
}
