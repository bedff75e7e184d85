package bench

import (
	"os"
	"testing"
)

// TestMain serves the embedded broker when the test binary is started as
// one (startBroker), and runs the tests otherwise.
func TestMain(m *testing.M) {
	if ServeBrokerIfAsked() {
		return
	}
	os.Exit(m.Run())
}
