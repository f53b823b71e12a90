package mcp_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: sessions, calls
// and their waits all end with the server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
