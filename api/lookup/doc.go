// Package lookup is the store behind "any instance answers for any intent":
// a view of every intent's result, timeout event and pending state,
// materialised on each instance from the results and timeouts topics and the
// router's pending changelog, persisted in a directory (an embedded pebble
// database) and resumed after a restart from the positions it committed with
// its data. It implements [api.IntentLookup].
//
// It owns:
//
//   - [Store]: the view and its keys (keys.go): (tenant, intent id) → result,
//     timeout event, pending state; a tenant's intents by time; each record's
//     partition and offset, so that what the topics no longer keep is deleted
//     ([Store.Expire]); the positions read and the topics' identity. A store
//     that cannot be read, or of another format, is emptied and rebuilt.
//   - [Materializer]: the loop that reads the topics through a [Source] from
//     the store's positions, writes batches, tells when the store has caught
//     up, empties the store when the topics were recreated, expires, and
//     hands the records from the topics' end at start on, and the progress
//     topic's (read for that only, never stored), to the instance's live
//     stream ([Live], which api.Feed implements).
//
// It does not own Kafka I/O: the [Source] is cmd/switchboard's adapter of
// router/kafkaio. It does not own the HTTP answers, the tenant rules of the
// API (the caller passes the tenant it may see), nor the in-memory recent
// results, the ordering of progress before results and the streams' fan-out
// (api.Feed, api.Results).
//
// Time comes from an injected clockwork.Clock (flush and expiry timing).
package lookup
