// Package bench measures Switchboard the way a caller sees it: `switchboard
// bench` hands it its checked Options and its Wiring (the configuration it
// loaded, how to build Kafka settings and a codec), and Run starts a router
// in this process on topics of its own (bench.<id>.*), demo agents, an
// open-loop publisher and read_committed readers, offers the load (a fixed
// rate, or a step-up to the knee), and with --baseline runs the same four
// hops as plain consume-produce loops, then reports latencies by hop,
// outcomes, the broker requests per intent, CPU and RSS, as a table or JSON.
//
// It owns every goroutine, topic and consumer group it starts and deletes
// the topics afterwards unless told to keep them. It does not parse flags or
// load configuration files (cmd/switchboard does), and it is not a test
// harness: what it measures is reported, never asserted.
package bench
