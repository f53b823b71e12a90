// Package client is how programs talk to Switchboard over Kafka: publish an
// intent and wait for its result (Publisher, Await; Follow for its progress
// too), and serve intents as an agent (Agent, at least once: it commits a
// request once its answer is acknowledged; a handler reports progress with
// Progress). The command line's send and agent subcommands, the API and the
// demo agents of 'switchboard dev' (DemoHandler, WriterHandler) are built on
// it.
//
// It imports no engine package: records are router/port's, Kafka is
// router/kafkaio's (TestImportsNoEngine keeps it so).
//
// Agents in other languages need none of this: they read AgentRequest records
// from their topic and write AgentResponse records, keyed by the intent id, to
// the responses topic, in JSON or Avro, echoing the request's tenant (see
// README, "Writing an agent").
package client
