// Package contexts owns per-entity context: the in-memory store of the
// compacted context-snapshot topic (Store), freshness (Lookup answers fresh,
// stale or missing), the delta publisher that turns a context engine's
// feature updates into snapshots only when they matter (Publisher), and the
// windowed feature engine behind 'switchboard context aggregate'
// (Aggregator).
//
// Entities are (tenant, entity_id), tenant "" for none, like intents: the
// snapshot topic's key is SnapshotKey(tenant, entity), and every lookup and
// publish names the tenant whose namespace it reads or writes.
//
// Kafka stays behind small interfaces consumed here (Reader, Sender,
// EventReader); their confluent-kafka-go implementations live in
// router/kafkaio. The router and the API read the store through interfaces
// of their own (router.ContextLookup, api.ContextStore), which *Store
// satisfies.
//
// Time comes from an injected clockwork.Clock: snapshot ages, heartbeats and
// window closing all run on it, so tests drive them with a fake clock.
//
// An agent that needs the context of other entities than the one its intent
// names runs a Store of its own: it is a cache of the whole topic that the
// topic keeps current, and Lookup's max age is its time to live. Nothing is
// fetched on the hot path.
package contexts
