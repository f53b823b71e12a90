// Checks Switchboard's /mcp with the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json), which speaks the
// 2025-11-25 session handshake: list the tools with their schemas, call
// echo (answered), fraud_check (fallback, flagged), a call with an invalid
// argument (the schema error names the path), cancel a slow call, and
// create a task and get its result (experimental tasks/*).
//
// Usage: node ts_client.mjs http://127.0.0.1:8080/mcp
// (SWITCHBOARD_API_KEY, when set, is sent as the bearer credential.)
// Exit 0 and one line "ts-client: N passed, 0 failed" when all pass.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';

const url = process.argv[2];
const headers = process.env.SWITCHBOARD_API_KEY ? { Authorization: `Bearer ${process.env.SWITCHBOARD_API_KEY}` } : {};
let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name}: ${detail}`); }
}
const text = (res) => (res.content || []).map((c) => c.text || '').join('');
const nonce = randomUUID();

const client = new Client({ name: 'ts-check', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));

const tools = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t]));
check('tools/list lists echo with its schemas',
  tools.echo && tools.echo.inputSchema.required?.[0] === 'text' && tools.echo.outputSchema?.type === 'object', JSON.stringify(tools.echo));
check('tools/list says task support', tools.echo?.execution?.taskSupport === 'optional', JSON.stringify(tools.echo));

let res = await client.callTool({ name: 'echo', arguments: { text: 'hello from typescript', nonce } });
check('echo is answered', !res.isError && res.structuredContent?.echo?.text === 'hello from typescript' && res._meta?.outcome === 'answered', JSON.stringify(res));

res = await client.callTool({ name: 'fraud_check', arguments: { amount: 12, nonce } });
check('fraud_check falls back, flagged', !res.isError && res._meta?.fallback === true && res._meta?.outcome === 'fallback_static', JSON.stringify(res));

// A progress-sending agent: the writer streams words as progress.
const reports = [];
res = await client.callTool({ name: 'test_tool_with_progress', arguments: { nonce } }, undefined, { onprogress: (p) => reports.push(p), timeout: 60000 });
const values = reports.map((p) => p.progress);
check('progress notifications arrive before the result, increasing',
  !res.isError && reports.length >= 3 && values.every((v, i) => i === 0 || v >= values[i - 1]) && reports.at(-1).total > 0,
  `${reports.length} reports ${JSON.stringify(reports.slice(0, 3))} ${JSON.stringify(res)}`);

res = await client.callTool({ name: 'fraud_check', arguments: { amount: -5, nonce } });
check('an invalid argument is a tool error naming the path', res.isError && text(res).includes('/amount'), JSON.stringify(res));

// Cancel a slow call: the SDK sends notifications/cancelled; the intent
// resolves cancelled, which tasks/list shows.
const abort = new AbortController();
const slow = client.callTool({ name: 'slow_job', arguments: { demo: { delay_ms: 20000 }, nonce } }, undefined, { signal: abort.signal, timeout: 60000 })
  .then(() => 'returned', (e) => 'aborted');
setTimeout(() => abort.abort('the user gave up'), 1000);
check('a slow call can be aborted', (await slow) === 'aborted', 'it returned');
let cancelled = false;
for (let i = 0; i < 100 && !cancelled; i++) {
  const list = await client.experimental.tasks.listTasks();
  cancelled = list.tasks.some((t) => t.status === 'cancelled');
  if (!cancelled) await new Promise((r) => setTimeout(r, 100));
}
check('a cancelled slow call resolves cancelled', cancelled, 'no cancelled intent in tasks/list');

// A task: created at once, its result fetched with tasks/result.
let taskId, result;
for await (const m of client.experimental.tasks.callToolStream({ name: 'echo', arguments: { text: 'as a task', nonce } }, undefined, { task: { ttl: 60000 } })) {
  if (m.type === 'taskCreated') taskId = m.task.taskId;
  if (m.type === 'result') result = m.result;
  if (m.type === 'error') { check('the task runs', false, String(m.error)); break; }
}
check('a task is created', typeof taskId === 'string' && taskId.startsWith('mcp-'), String(taskId));
check('the task has its result', result && text(result).includes('as a task'), JSON.stringify(result));
const viaResult = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
check('tasks/result returns it again', text(viaResult).includes('as a task'), JSON.stringify(viaResult));

await client.close();
console.log(`ts-client: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
