#!/usr/bin/env python3
"""A Switchboard agent in Python: reads AgentRequests, writes AgentResponses.

It answers {"agent": NAME, "lang": "python", "echo": <payload>} after sending
payload.steps progress records (default 0), payload.delay_ms apart. On the
way it does what every agent should:

- tells a cancel notice (header switchboard.control: cancel) from a request
  before decoding anything, and drops that intent's work without answering;
- skips a request whose deadline (unix ms) has passed;
- keys every response by the intent id and uses the murmur2 partitioner, so
  the response lands on its request's partition number;
- copies attempt, tenant and the traceparent header onto what it writes;
- commits a request's offset only once it has answered (or dropped) it and
  everything before it on that partition.

JSON requests are answered in JSON; Avro requests (Confluent wire format,
magic byte 0) in Avro through the Schema Registry, with the repository's
schemas/agent_response.avsc under the subject mcp.agent.response-value.

    python agent.py --name py --bootstrap localhost:9092 --registry http://localhost:8081
"""

import argparse
import heapq
import json
import os
import pathlib
import signal
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

SCHEMAS = pathlib.Path(
    os.environ.get("SWITCHBOARD_SCHEMAS", pathlib.Path(__file__).resolve().parents[4] / "schemas")
)


def now_ms():
    return int(time.time() * 1000)


class Job:
    """One request in hand: its progress steps still to send, then the answer."""

    def __init__(self, msg, req, avro):
        self.msg, self.req, self.avro = msg, req, avro
        payload = req["payload"] if isinstance(req["payload"], dict) else {}
        number = lambda v: int(v) if isinstance(v, (int, float)) else 0  # noqa: E731
        self.steps = max(0, min(number(payload.get("steps")), 100))
        self.delay = max(0, min(number(payload.get("delay_ms")), 10_000)) / 1000
        self.sent = 0
        self.due = time.monotonic()
        self.cancelled = False


class Agent:
    def __init__(self, args):
        self.name, self.responses = args.name, args.responses
        group = args.group or f"switchboard-agent-{args.name}"
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.metrics.push": False,
        })
        # murmur2_random is the Java clients' partitioner: the response lands on
        # the partition number of its request, which is where the router looks.
        self.producer = Producer({"bootstrap.servers": args.bootstrap, "partitioner": "murmur2_random",
                                  "enable.idempotence": True, "enable.metrics.push": False})
        self.consumer.subscribe([args.topic or f"mcp.agent.{args.name}.request"])
        self.read_avro = self.write_avro = None
        if args.registry:
            sr = SchemaRegistryClient({"url": args.registry})
            self.read_avro = AvroDeserializer(sr)
            self.write_avro = AvroSerializer(sr, (SCHEMAS / "agent_response.avsc").read_text())
        self.jobs = {}        # intent id -> Job
        self.queue = []       # (due, seq, intent id): the next step of each job
        self.seq = 0
        self.offsets = {}     # (topic, partition) -> {offset: done}

    # ---- reading

    def handle(self, msg):
        self.track(msg)
        headers = dict(msg.headers() or [])
        if headers.get("switchboard.control") is not None:
            if headers["switchboard.control"] == b"cancel":
                self.cancel(msg)
            return self.done(msg)
        value = msg.value() or b""
        try:
            if value[:1] == b"\x00":
                if self.read_avro is None:
                    raise ValueError("an Avro request, and no --registry")
                req = self.read_avro(value, SerializationContext(msg.topic(), MessageField.VALUE))
                req["payload"] = json.loads(req["payload"])   # JSON text inside Avro
                avro = True
            else:
                req, avro = json.loads(value), False
            job = Job(msg, req, avro)
            expired = req["deadline"] <= now_ms()
        except Exception as e:  # undecodable or not a request: log it, never stop the agent
            print(f"agent {self.name}: skipped an unreadable record at offset {msg.offset()}: {e!r}", flush=True)
            return self.done(msg)
        if expired:
            print(f"agent {self.name}: skipped {req['intent_id']}: deadline passed", flush=True)
            return self.done(msg)
        self.jobs[req["intent_id"]] = job
        self.schedule(job)

    def cancel(self, msg):
        notice = json.loads(msg.value() or b"{}") if msg.value() else {}
        intent_id = notice.get("intent_id") or (msg.key() or b"").decode()
        job = self.jobs.pop(intent_id, None)
        if job is not None:
            job.cancelled = True
            print(f"agent {self.name}: cancelled {intent_id} ({notice.get('reason', '')})", flush=True)
            self.done(job.msg)

    # ---- working

    def schedule(self, job):
        self.seq += 1
        heapq.heappush(self.queue, (job.due, self.seq, job.req["intent_id"]))

    def step(self):
        """Advances every job that is due by one step."""
        while self.queue and self.queue[0][0] <= time.monotonic():
            _, _, intent_id = heapq.heappop(self.queue)
            job = self.jobs.get(intent_id)
            if job is None or job.cancelled:
                continue
            if job.sent < job.steps:
                job.sent += 1
                self.send(job, "progress", sequence=job.sent, message="working",
                          progress=job.sent, total=job.steps, partial={"step": job.sent})
                job.due = time.monotonic() + job.delay
                self.schedule(job)
                continue
            answer = {"agent": self.name, "lang": "python", "echo": job.req["payload"]}
            self.send(job, "ok", answer=answer)
            del self.jobs[intent_id]
            self.done(job.msg)

    def send(self, job, status, answer=None, partial=None, **progress):
        req = job.req
        resp = {"request_id": req["intent_id"], "agent": self.name, "status": status,
                "attempt": req["attempt"], "produced_at": now_ms(), **progress}
        if req.get("tenant") is not None:
            resp["tenant"] = req["tenant"]   # written where the schema has the field
        headers = [(k, v) for k, v in (job.msg.headers() or []) if k == "traceparent"]
        if job.avro:
            # Avro carries answers and partials as JSON text; unknown fields are left out.
            resp["answer"] = None if answer is None else json.dumps(answer)
            resp["partial"] = None if partial is None else json.dumps(partial)
            value = self.write_avro(resp, SerializationContext(self.responses, MessageField.VALUE))
        else:
            resp.update({k: v for k, v in (("answer", answer), ("partial", partial)) if v is not None})
            value = json.dumps(resp).encode()
        self.producer.produce(self.responses, key=req["intent_id"], value=value, headers=headers)

    # ---- committing

    def track(self, msg):
        self.offsets.setdefault((msg.topic(), msg.partition()), {})[msg.offset()] = False

    def done(self, msg):
        self.offsets[(msg.topic(), msg.partition())][msg.offset()] = True

    def commit(self):
        """Commits, per partition, past the records answered with all before them."""
        commits = []
        for (topic, partition), offs in self.offsets.items():
            upto = None
            for off in sorted(offs):
                if not offs[off]:
                    break
                upto = off
                del offs[off]
            if upto is not None:
                commits.append(TopicPartition(topic, partition, upto + 1))
        if commits:
            self.producer.flush(10)   # answered means written: flush before committing
            self.consumer.commit(offsets=commits, asynchronous=False)

    def run(self):
        running = [True]
        signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
        signal.signal(signal.SIGINT, lambda *_: running.__setitem__(0, False))
        print(f"agent {self.name}: ready", flush=True)
        while running[0]:
            wait = 0.2 if not self.queue else max(0.0, min(0.2, self.queue[0][0] - time.monotonic()))
            msg = self.consumer.poll(wait)
            if msg is not None and not msg.error():
                self.handle(msg)
            elif msg is not None:
                print(f"agent {self.name}: {msg.error()}", flush=True)
            self.step()
            self.producer.poll(0)
            self.commit()
        self.producer.flush(10)
        self.consumer.close()


def main():
    p = argparse.ArgumentParser(description="A Switchboard agent in Python.")
    p.add_argument("--name", required=True, help="the agent's name in the configuration")
    p.add_argument("--bootstrap", default="localhost:9092")
    p.add_argument("--registry", default="", help="Schema Registry URL; needed for Avro requests")
    p.add_argument("--topic", default="", help="default mcp.agent.<name>.request")
    p.add_argument("--group", default="", help="default switchboard-agent-<name>")
    p.add_argument("--responses", default="mcp.agent.response")
    Agent(p.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
