#!/usr/bin/env python3
"""Publishes one IntentRequest to Kafka and prints its IntentResult.

The result is read from the results topic, on the partition the request
went to (Switchboard keys requests and results by the intent id, and both
topics have the same partition count), from where that partition ended
before publishing: no consumer group, nothing else read twice.

    python publish.py --type echo --payload '{"q":1}' --encoding avro \
        --bootstrap localhost:9092 --registry http://localhost:8081
"""

import argparse
import json
import os
import pathlib
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

SCHEMAS = pathlib.Path(
    os.environ.get("SWITCHBOARD_SCHEMAS", pathlib.Path(__file__).resolve().parents[4] / "schemas")
)


def main():
    p = argparse.ArgumentParser(description="Publish an intent, print its result.")
    p.add_argument("--type", required=True, help="the intent type")
    p.add_argument("--payload", default="{}", help="a JSON document")
    p.add_argument("--encoding", choices=["json", "avro"], default="json")
    p.add_argument("--bootstrap", default="localhost:9092")
    p.add_argument("--registry", default="", help="Schema Registry URL; needed for Avro (and Avro results)")
    p.add_argument("--requests", default="mcp.intent.request")
    p.add_argument("--results", default="mcp.intent.result")
    p.add_argument("--wait", type=float, default=30, help="seconds to wait for the result")
    args = p.parse_args()

    intent_id = str(uuid.uuid4())
    # A new W3C trace: the router takes it from the record's traceparent field
    # and passes it on (field and header) to the agent, which continues it.
    traceparent = f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
    intent = {"intent_id": intent_id, "intent_type": args.type, "payload": json.loads(args.payload),
              "created_at": int(time.time() * 1000), "traceparent": traceparent}
    # Optional fields left out: target_agent, context_ref, timeout_ms, session_id, tenant.
    headers = [("traceparent", traceparent)]
    sr = SchemaRegistryClient({"url": args.registry}) if args.registry else None
    if args.encoding == "avro":
        if sr is None:
            sys.exit("publish: --encoding avro needs --registry")
        ser = AvroSerializer(sr, (SCHEMAS / "intent_request.avsc").read_text())
        intent["payload"] = json.dumps(intent["payload"])   # JSON text inside Avro
        value = ser(intent, SerializationContext(args.requests, MessageField.VALUE))
    else:
        value = json.dumps(intent).encode()

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.metrics.push": False})
    parts = consumer.list_topics(args.results, timeout=10).topics[args.results].partitions
    ends = {n: consumer.get_watermark_offsets(TopicPartition(args.results, n), timeout=10)[1] for n in parts}

    delivered = []
    producer = Producer({"bootstrap.servers": args.bootstrap, "partitioner": "murmur2_random",
                         "enable.metrics.push": False})
    producer.produce(args.requests, key=intent_id, value=value, headers=headers,
                     on_delivery=lambda err, msg: delivered.append((err, msg)))
    producer.flush(10)
    if not delivered or delivered[0][0] is not None:
        sys.exit(f"publish: not delivered: {delivered[0][0] if delivered else 'timed out'}")
    partition = delivered[0][1].partition()
    print(f"published {intent_id} to {args.requests}[{partition}] traceparent {headers[0][1]}", file=sys.stderr)

    consumer.assign([TopicPartition(args.results, partition, ends[partition])])
    avro = AvroDeserializer(sr) if sr else None
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() or (msg.key() or b"").decode() != intent_id:
            continue
        v = msg.value()
        if v[:1] == b"\x00":   # results are Avro whenever the router has a registry
            result = avro(v, SerializationContext(args.results, MessageField.VALUE))
            for k in ("answer",):
                if result.get(k) is not None:
                    result[k] = json.loads(result[k])
        else:
            result = json.loads(v)
        print(json.dumps(result))
        consumer.close()
        return 0
    consumer.close()
    sys.exit(f"publish: no result for {intent_id} within {args.wait}s")


if __name__ == "__main__":
    sys.exit(main())
