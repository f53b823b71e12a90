// One step of the task failover scenario, with the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json) speaking 2025-11-25
// with sessions and its experimental tasks (client.experimental.tasks).
// TestMCPClientsTaskFailoverOnKafka (cmd/switchboard) runs the steps against
// two 'switchboard serve' instances on Apache Kafka and kills the first with
// SIGKILL between them:
//
//   create URL NONCE     tools/call slow_job {"n": NONCE} with params.task
//                        (callToolStream, stopped at its taskCreated message:
//                        the rest of the task is read elsewhere); prints
//                        "task <id>"
//   pending URL ID       tasks/get (getTask): a new session on this instance
//                        knows the task, still working
//   result URL ID NONCE  getTask until the task ends, then tasks/result
//                        (getTaskResult): completed, and the result is the
//                        slow agent's answer {"agent": "slow", "echo": {"n": NONCE}}
//
// Run from a directory whose node_modules holds the SDK (the driver links
// it). SWITCHBOARD_API_KEY, when set, is sent as the bearer credential.
// Prints one line per check and "ts-task: N passed, 0 failed"; exit 0 when
// all pass.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { isDeepStrictEqual } from 'node:util';

const [step, url, ...args] = process.argv.slice(2);
const headers = process.env.SWITCHBOARD_API_KEY ? { Authorization: `Bearer ${process.env.SWITCHBOARD_API_KEY}` } : {};
const terminal = ['completed', 'failed', 'cancelled'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name}: ${detail}`); }
}

const client = new Client({ name: 'ts-task-failover', version: '1' });
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));

  if (step === 'create') {
    const [nonce] = args;
    check('the SDK negotiated 2025-11-25', client.transport.protocolVersion === '2025-11-25', client.transport.protocolVersion);
    let created;
    const stream = client.experimental.tasks.callToolStream({ name: 'slow_job', arguments: { n: nonce } }, undefined, { task: { ttl: 600000 } });
    for await (const m of stream) {
      created = m;
      break; // the task is created: its status and result are read from another instance
    }
    const task = created?.type === 'taskCreated' ? created.task : undefined;
    const ok = typeof task?.taskId === 'string' && task.taskId.startsWith('mcp-') && task.status === 'working';
    check('tools/call with params.task is answered at once with a working task', ok, JSON.stringify(created));
    if (ok) console.log(`task ${task.taskId}`);
  } else if (step === 'pending') {
    // The instance that created the task is gone: this one may need a moment
    // to learn of it (its lookup store reads the topics), so an unknown task
    // is asked again for a while.
    const [taskId] = args;
    let task, err;
    for (const deadline = Date.now() + 60000; Date.now() < deadline;) {
      try {
        task = await client.experimental.tasks.getTask(taskId);
        break;
      } catch (e) {
        if (!(e instanceof McpError)) throw e;
        err = e;
        await sleep(500);
      }
    }
    check('tasks/get on another instance knows the task, still working',
      task?.taskId === taskId && task.status === 'working', task ? JSON.stringify(task) : `no answer in 60s: ${err}`);
  } else if (step === 'result') {
    const [taskId, nonce] = args;
    let task;
    for (const deadline = Date.now() + 120000; ;) {
      task = await client.experimental.tasks.getTask(taskId);
      if (terminal.includes(task.status) || Date.now() > deadline) break;
      await sleep(task.pollInterval ?? 1000);
    }
    check('tasks/get on another instance: the task completed', task.status === 'completed', JSON.stringify(task));
    const res = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    const want = { agent: 'slow', echo: { n: nonce } };
    check("tasks/result: the agent's answer", !res.isError && isDeepStrictEqual(res.structuredContent, want),
      `want structuredContent ${JSON.stringify(want)}, got ${JSON.stringify(res)}`);
    check('tasks/result names its task', res._meta?.['io.modelcontextprotocol/related-task']?.taskId === taskId, JSON.stringify(res._meta));
  } else {
    check(`step ${step}`, false, 'unknown step: create, pending or result');
  }
} catch (e) {
  check(`the ${step} step against ${url}`, false, String(e)); // one line, not a stack
}

await client.close().catch(() => {});
console.log(`ts-task: ${passed} passed, ${failed} failed`);
process.exit(failed || !passed ? 1 : 0);
