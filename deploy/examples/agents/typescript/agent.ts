// A Switchboard agent in TypeScript: reads AgentRequests, writes AgentResponses.
//
// It answers {"agent": NAME, "lang": "typescript", "echo": <payload>} after
// sending payload.steps progress records (default 0), payload.delay_ms apart.
// On the way it does what every agent should:
//
// - tells a cancel notice (header switchboard.control: cancel) from a request
//   before decoding anything, and stops that intent's work without answering;
// - skips a request whose deadline (unix ms) has passed;
// - keys every response by the intent id with kafkajs' default partitioner
//   (Java-compatible murmur2), so it lands on its request's partition number;
// - copies attempt, tenant and the traceparent header onto what it writes;
// - commits a request's offset only once it has answered (or dropped) it and
//   everything before it on that partition.
//
// JSON requests are answered in JSON; Avro requests (Confluent wire format,
// magic byte 0) in Avro through the Schema Registry, with the repository's
// schemas/agent_response.avsc under the subject mcp.agent.response-value.
//
//   node agent.ts --name ts --bootstrap localhost:9092 --registry http://localhost:8081
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import kafkajs from "kafkajs";
import registryPkg from "@kafkajs/confluent-schema-registry";

const { Kafka, Partitioners, logLevel } = kafkajs;
const { SchemaRegistry, SchemaType } = registryPkg;

const { values: opt } = parseArgs({
  options: {
    name: { type: "string" },
    bootstrap: { type: "string", default: "localhost:9092" },
    registry: { type: "string", default: "" },
    topic: { type: "string", default: "" },
    group: { type: "string", default: "" },
    responses: { type: "string", default: "mcp.agent.response" },
  },
});
if (!opt.name) throw new Error("agent: --name is required");
const name: string = opt.name;
const schemas = process.env.SWITCHBOARD_SCHEMAS ?? new URL("../../../../schemas", import.meta.url).pathname;

interface AgentRequest {
  intent_id: string;
  intent_type: string;
  agent: string;
  payload: any;
  deadline: number;
  attempt: number;
  tenant?: string | null;
  session_id?: string | null;
}

const kafka = new Kafka({ clientId: `agent-${name}`, brokers: opt.bootstrap.split(","), logLevel: logLevel.WARN });
const consumer = kafka.consumer({ groupId: opt.group || `switchboard-agent-${name}` });
const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: true });
const registry = opt.registry ? new SchemaRegistry({ host: opt.registry }) : undefined;
let responseSchemaId: number | undefined;

const inHand = new Map<string, AbortController>(); // intent id -> its work
const offsets = new Map<number, Map<bigint, boolean>>(); // partition -> offset -> done

function headerOf(headers: Record<string, any> | undefined, key: string): string | undefined {
  const v = headers?.[key];
  return v === undefined ? undefined : String(Array.isArray(v) ? v[0] : v);
}

async function decode(value: Buffer): Promise<{ req: AgentRequest; avro: boolean }> {
  if (value[0] === 0) {
    if (!registry) throw new Error("an Avro request, and no --registry");
    const req = (await registry.decode(value)) as AgentRequest;
    req.payload = JSON.parse(req.payload); // JSON text inside Avro
    return { req, avro: true };
  }
  return { req: JSON.parse(value.toString()), avro: false };
}

async function send(req: AgentRequest, avro: boolean, traceparent: string | undefined, resp: Record<string, any>) {
  const record: Record<string, any> = {
    request_id: req.intent_id, agent: name, attempt: req.attempt, produced_at: Date.now(), ...resp,
  };
  if (req.tenant != null) record.tenant = req.tenant; // written where the schema has the field
  let value: Buffer;
  if (avro) {
    // Avro carries answers and partials as JSON text; fields the schema lacks are left out.
    for (const k of ["answer", "partial"]) record[k] = record[k] === undefined ? null : JSON.stringify(record[k]);
    if (responseSchemaId === undefined) {
      const schema = readFileSync(`${schemas}/agent_response.avsc`, "utf8");
      ({ id: responseSchemaId } = await registry!.register(
        { type: SchemaType.AVRO, schema },
        { subject: `${opt.responses}-value` },
      ));
    }
    value = await registry!.encode(responseSchemaId!, record);
  } else {
    value = Buffer.from(JSON.stringify(record));
  }
  const headers = traceparent ? { traceparent } : undefined;
  await producer.send({ topic: opt.responses, messages: [{ key: req.intent_id, value, headers }] });
}

async function work(req: AgentRequest, avro: boolean, traceparent: string | undefined, signal: AbortSignal) {
  const payload = req.payload && typeof req.payload === "object" ? req.payload : {};
  const steps = Math.max(0, Math.min(Number(payload.steps ?? 0), 100));
  const delay = Math.max(0, Math.min(Number(payload.delay_ms ?? 0), 10_000));
  for (let i = 1; i <= steps; i++) {
    if (signal.aborted) return;
    await send(req, avro, traceparent, {
      status: "progress", sequence: i, message: "working", progress: i, total: steps, partial: { step: i },
    });
    await new Promise((r) => setTimeout(r, delay));
  }
  if (signal.aborted) return; // cancelled: send nothing
  await send(req, avro, traceparent, { status: "ok", answer: { agent: name, lang: "typescript", echo: req.payload } });
}

// Commits, per partition, past the records answered with all before them.
async function commit(topic: string, partition: number) {
  const offs = offsets.get(partition)!;
  let upto: bigint | undefined;
  for (const off of [...offs.keys()].sort((a, b) => (a < b ? -1 : 1))) {
    if (!offs.get(off)) break;
    upto = off;
    offs.delete(off);
  }
  if (upto !== undefined) await consumer.commitOffsets([{ topic, partition, offset: String(upto + 1n) }]);
}

await Promise.all([consumer.connect(), producer.connect()]);
await consumer.subscribe({ topic: opt.topic || `mcp.agent.${name}.request`, fromBeginning: true });
await consumer.run({
  autoCommit: false,
  partitionsConsumedConcurrently: 4,
  eachMessage: async ({ topic, partition, message }) => {
    const offset = BigInt(message.offset);
    if (!offsets.has(partition)) offsets.set(partition, new Map());
    offsets.get(partition)!.set(offset, false);
    const done = () => {
      offsets.get(partition)!.set(offset, true);
      return commit(topic, partition);
    };
    const control = headerOf(message.headers, "switchboard.control");
    if (control !== undefined) {
      if (control === "cancel") {
        const notice = message.value?.length ? JSON.parse(message.value.toString()) : {};
        const id: string = notice.intent_id ?? message.key?.toString();
        const work = inHand.get(id);
        if (work) {
          work.abort();
          console.log(`agent ${name}: cancelled ${id} (${notice.reason ?? ""})`);
        }
      }
      return done();
    }
    let req: AgentRequest, avro: boolean;
    try {
      ({ req, avro } = await decode(message.value ?? Buffer.alloc(0)));
    } catch (e) {
      console.log(`agent ${name}: skipped an unreadable record at offset ${message.offset}: ${e}`);
      return done();
    }
    if (typeof req?.intent_id !== "string" || typeof req.deadline !== "number") {
      console.log(`agent ${name}: skipped an unreadable record at offset ${message.offset}: not a request`);
      return done();
    }
    if (req.deadline <= Date.now()) {
      console.log(`agent ${name}: skipped ${req.intent_id}: deadline passed`);
      return done();
    }
    // The work runs on while the loop reads on, so that a cancel notice behind
    // the request on this partition is read in time.
    const ctl = new AbortController();
    inHand.set(req.intent_id, ctl);
    work(req, avro, headerOf(message.headers, "traceparent"), ctl.signal)
      .catch((e) => console.log(`agent ${name}: ${req.intent_id}: ${e}`))
      .finally(() => {
        inHand.delete(req.intent_id);
        return done();
      })
      .catch((e) => console.log(`agent ${name}: commit: ${e}`)); // a rebalance: the next owner reads it again
  },
});
console.log(`agent ${name}: ready`);

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, async () => {
    await consumer.disconnect();
    await producer.disconnect();
    process.exit(0);
  });
}
