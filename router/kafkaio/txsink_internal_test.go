package kafkaio

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// The transactional producer stages offsets once per transaction, at its
// commit: were it a port.TxRegistrar, the event loop would stage them a
// second time before each transaction's first output (two more round trips
// on the dispatch's path).
func TestTxSinkStagesOffsetsOnlyAtCommit(t *testing.T) {
	if _, ok := any(&TxSink{}).(port.TxRegistrar); ok {
		t.Fatal("kafkaio.TxSink is a port.TxRegistrar")
	}
}
