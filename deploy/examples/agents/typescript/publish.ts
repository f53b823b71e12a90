// Publishes one intent through Switchboard's HTTP API and prints its result.
//
// POST /v1/intents?wait=… publishes the IntentRequest to Kafka and holds the
// reply until the intent's IntentResult (or the wait runs out: then 202 with
// the intent id, and GET /v1/intents/{id} fetches the result later). The
// traceparent header starts the trace that the router and the agent continue.
//
//   SWITCHBOARD_API_KEY=… node publish.ts --api http://127.0.0.1:8080 --type echo --payload '{"q":1}'
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    api: { type: "string", default: "http://127.0.0.1:8080" },
    type: { type: "string" },
    payload: { type: "string", default: "{}" },
    wait: { type: "string", default: "30s" },
  },
});
if (!opt.type) throw new Error("publish: --type is required");

const headers: Record<string, string> = {
  "content-type": "application/json",
  traceparent: `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`,
};
const key = process.env.SWITCHBOARD_API_KEY; // serve requires a credential; dev does not
if (key) headers.authorization = `Bearer ${key}`;

const res = await fetch(`${opt.api}/v1/intents?wait=${encodeURIComponent(opt.wait)}`, {
  method: "POST",
  headers,
  body: JSON.stringify({ intent_type: opt.type, payload: JSON.parse(opt.payload) }),
});
const body = await res.json();
if (res.status !== 200 || !body.outcome) {
  console.error(`publish: HTTP ${res.status}: ${JSON.stringify(body)}`);
  process.exit(1);
}
console.log(JSON.stringify(body));
