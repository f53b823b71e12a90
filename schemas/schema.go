package schemas

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hamba/avro/v2"
)

// The .avsc files are the contract: agent authors in any language read them,
// and the registry stores them verbatim (with docs and defaults). Each file is
// self-contained, so nested types (ContextSnapshot, ErrorInfo, Timeline) are
// defined inline where used.
var (
	//go:embed intent_request.avsc
	intentRequestAvsc string
	//go:embed agent_request.avsc
	agentRequestAvsc string
	//go:embed agent_response.avsc
	agentResponseAvsc string
	//go:embed intent_timeout.avsc
	intentTimeoutAvsc string
	//go:embed intent_result.avsc
	intentResultAvsc string
	//go:embed context_snapshot.avsc
	contextSnapshotAvsc string
	//go:embed pending_intent.avsc
	pendingIntentAvsc string
	//go:embed fallback_answer.avsc
	fallbackAnswerAvsc string
	//go:embed intent_progress.avsc
	intentProgressAvsc string
)

// Record is one of the Switchboard records: *IntentRequest, *AgentRequest,
// *AgentResponse, *IntentTimeout, *IntentResult, *IntentProgress, *ContextSnapshot, and the
// router's own *PendingIntent and *FallbackAnswer. The
// interface is closed: only this package's types implement it.
type Record interface {
	kind() kind
}

// kind indexes the record types; it is the codec's table key.
type kind uint8

const (
	kindIntentRequest kind = iota
	kindAgentRequest
	kindAgentResponse
	kindIntentTimeout
	kindIntentResult
	kindContextSnapshot
	kindPendingIntent
	kindFallbackAnswer
	kindIntentProgress
	numKinds
)

func (*IntentRequest) kind() kind   { return kindIntentRequest }
func (*AgentRequest) kind() kind    { return kindAgentRequest }
func (*AgentResponse) kind() kind   { return kindAgentResponse }
func (*IntentTimeout) kind() kind   { return kindIntentTimeout }
func (*IntentResult) kind() kind    { return kindIntentResult }
func (*ContextSnapshot) kind() kind { return kindContextSnapshot }
func (*PendingIntent) kind() kind   { return kindPendingIntent }
func (*FallbackAnswer) kind() kind  { return kindFallbackAnswer }
func (*IntentProgress) kind() kind  { return kindIntentProgress }

var (
	_ Record = (*IntentRequest)(nil)
	_ Record = (*AgentRequest)(nil)
	_ Record = (*AgentResponse)(nil)
	_ Record = (*IntentTimeout)(nil)
	_ Record = (*IntentResult)(nil)
	_ Record = (*ContextSnapshot)(nil)
	_ Record = (*PendingIntent)(nil)
	_ Record = (*FallbackAnswer)(nil)
	_ Record = (*IntentProgress)(nil)
)

// recordSchema is one parsed .avsc file.
type recordSchema struct {
	name    string      // full name, e.g. "mcp.switchboard.IntentRequest"
	text    string      // the .avsc file as written
	compact string      // the .avsc file without insignificant whitespace: what is registered
	schema  avro.Schema // parsed
}

// avscTexts is indexed by kind.
var avscTexts = [numKinds]string{
	kindIntentRequest:   intentRequestAvsc,
	kindAgentRequest:    agentRequestAvsc,
	kindAgentResponse:   agentResponseAvsc,
	kindIntentTimeout:   intentTimeoutAvsc,
	kindIntentResult:    intentResultAvsc,
	kindContextSnapshot: contextSnapshotAvsc,
	kindPendingIntent:   pendingIntentAvsc,
	kindFallbackAnswer:  fallbackAnswerAvsc,
	kindIntentProgress:  intentProgressAvsc,
}

// recordSchemas parses the embedded files once. They are part of the binary,
// so an error is a build defect (TestEmbeddedSchemas catches it); NewCodec
// reports it rather than panicking.
var recordSchemas = sync.OnceValues(func() ([numKinds]*recordSchema, error) {
	var out [numKinds]*recordSchema
	for k, text := range avscTexts {
		rs, err := parseRecordSchema(text)
		if err != nil {
			return out, fmt.Errorf("schemas: embedded schema %d: %w", k, err)
		}
		out[k] = rs
	}
	return out, nil
})

// parseRecordSchema parses one self-contained schema with its own name cache,
// so that files defining the same nested type do not clash.
func parseRecordSchema(text string) (*recordSchema, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	named, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("not a record schema: %s", s.Type())
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return nil, err
	}
	return &recordSchema{name: named.FullName(), text: text, compact: buf.String(), schema: s}, nil
}

// AvroSchema returns the Avro schema of r's type: the text of its .avsc file,
// with docs and defaults. r may be a nil pointer, e.g. (*IntentResult)(nil).
func AvroSchema(r Record) string { return avscTexts[r.kind()] }

// SchemaName returns the full Avro name of r's type, e.g.
// "mcp.switchboard.IntentResult". r may be a nil pointer.
func SchemaName(r Record) string { return schemaNames[r.kind()] }

var schemaNames = [numKinds]string{
	kindIntentRequest:   "mcp.switchboard.IntentRequest",
	kindAgentRequest:    "mcp.switchboard.AgentRequest",
	kindAgentResponse:   "mcp.switchboard.AgentResponse",
	kindIntentTimeout:   "mcp.switchboard.IntentTimeout",
	kindIntentResult:    "mcp.switchboard.IntentResult",
	kindContextSnapshot: "mcp.switchboard.ContextSnapshot",
	kindPendingIntent:   "mcp.switchboard.PendingIntent",
	kindFallbackAnswer:  "mcp.switchboard.FallbackAnswer",
	kindIntentProgress:  "mcp.switchboard.IntentProgress",
}
