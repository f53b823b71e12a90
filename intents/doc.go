// Package intents holds Switchboard's domain rules for intents: what makes an
// intent request valid (with errors that name the field), how an intent's
// absolute deadline is computed, how intent ids are made, and what each
// outcome means.
//
// The wire forms of the records (and the enums they carry: Outcome, Status,
// TimeoutReason, FallbackKind) live in package schemas; this package gives them
// meaning. It does no I/O. Kafka clients that publish intents and serve them as
// an agent live in the subpackage intents/client.
package intents
