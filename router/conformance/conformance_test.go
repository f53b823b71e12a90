package conformance

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/router/embedded"
)

func TestEmbeddedBroker(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run(t, c.Bootstrap())
}
