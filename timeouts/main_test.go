package timeouts_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutine; goleak keeps it that way (and checks that
// the time.AfterFunc baseline benchmark stops every timer it starts).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
