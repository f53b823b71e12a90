// Package schemas owns Switchboard's records: their Avro schemas (the .avsc
// files embedded in the binary, namespace mcp.switchboard), their Go types,
// the wire codec that turns them into Kafka record values and back, and access
// to the Confluent Schema Registry.
//
// # Records
//
// IntentRequest, AgentRequest, AgentResponse, IntentTimeout, IntentResult,
// IntentProgress (an agent's progress as the router publishes it) and
// ContextSnapshot, with the field names of the .avsc files (AvroSchema returns
// one). Optional fields are pointers, Avro unions with null defaulting to
// null. Timestamps and deadlines are unix milliseconds. Enums carry an
// "unknown" symbol, the Avro default, which is what a reader sees when a
// newer writer uses a symbol it does not know. Payloads and answers are JSON
// documents (type JSON).
//
// # Wire formats
//
// A Codec writes one of two encodings:
//
//   - Avro in the Confluent wire format (with a registry, WithRegistry): magic
//     byte 0, the schema id as 4 big-endian bytes, the Avro binary body. The
//     schema is registered under the subject "<topic>-value" on first use and
//     the id cached. Payloads and answers are Avro strings holding JSON text.
//
//   - JSON (without a registry): an object with the same field names, payloads
//     and answers embedded as JSON values, so a kcat user writes natural JSON:
//
//     {"intent_id":"i-1","intent_type":"payments.refund","payload":{"amount":12}}
//
// Decode reads both, whatever the codec writes: a record whose first byte is
// '{' is JSON, one whose first byte is 0 is Avro (the writer's schema fetched
// by id and resolved against ours, so older and newer schema versions read).
// Unknown JSON fields are ignored. Decoding never panics, bounds its
// allocations, and fails with a *DecodeError whose class (ErrorClass) is meant
// for dead-letter headers; IsTransient tells a registry outage from a bad
// record.
//
// # What it does not do
//
// It does no Kafka I/O (no producing, consuming, headers or keys: see router/
// and intents/) and no domain validation (ids, deadlines, routing: see
// intents/). It checks only what the schemas promise: types, enum symbols,
// JSON payloads, sizes.
package schemas
