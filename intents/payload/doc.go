// Package payload holds the JSON Schemas (draft 2020-12) an intent type's
// payload and answer must satisfy, and checks documents against them.
//
// It owns compiling a schema once (at configuration time, so that a schema
// that does not compile is a configuration error) and validating a payload
// against it, with an error that names the JSON Pointer of the first failing
// value ([Error]). The compiled [Schema] keeps the schema's JSON text as it was
// written, so that tools/list and GET /v1/intent-types can hand it on
// unchanged ($schema, $defs, additionalProperties and all).
//
// It does not own where schemas come from (router/config reads them from the
// YAML or from files beside it) nor what a door does with a failing payload
// (the API answers 422, the MCP endpoint a tool error, the router resolves the
// intent rejected with class invalid_payload).
//
// Validation uses github.com/santhosh-tekuri/jsonschema/v6, which passes the
// JSON-Schema-Test-Suite for 2020-12 ($dynamicRef and unevaluated* included).
// A schema may not reach out: $ref to anything but the schema itself and the
// draft meta-schemas is refused, so compiling never reads a file or the
// network.
package payload
