package kafkaio

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/router"
)

// The transactional producer stages offsets once per transaction, at its
// commit: were it a router.TxRegistrar, the event loop would stage them a
// second time before each transaction's first output (two more round trips
// on the dispatch's path).
func TestTxSinkStagesOffsetsOnlyAtCommit(t *testing.T) {
	if _, ok := any(&TxSink{}).(router.TxRegistrar); ok {
		t.Fatal("kafkaio.TxSink is a router.TxRegistrar")
	}
}
