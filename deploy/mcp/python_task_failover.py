"""One step of the task failover scenario, with the official Python SDK
(mcp, pinned in requirements.txt) speaking 2026-07-28 and its tasks
extension (io.modelcontextprotocol/tasks). TestMCPClientsTaskFailoverOnKafka
(cmd/switchboard) runs the steps against two 'switchboard serve' instances
on Apache Kafka and kills the first with SIGKILL between them:

  create URL NONCE     tools/call slow_job {"n": NONCE} is answered at once
                       with a task; prints "task <id>"
  pending URL ID       tasks/get: this instance knows the task, still working
  result URL ID NONCE  tasks/get until the task ends: completed, and its
                       result is the slow agent's answer
                       {"agent": "slow", "echo": {"n": NONCE}}

mcp 2.3.0 has no tasks client. What it has is the extension API of
2026-07-28 (SEP-2133), and that is what this uses: TasksExtension below is
an mcp.client.extension.ClientExtension that the SDK advertises in every
request's capabilities, whose ResultClaim makes the SDK parse tools/call's
{"resultType": "task", ...} (client.session.call_tool with
allow_claimed=True returns it); tasks/get goes through
ClientSession.send_request with a Request subclass (name_param puts the task
id in the Mcp-Name header, as the extension asks). The transport, the
session and the JSON-RPC are the SDK's.

(SWITCHBOARD_API_KEY, when set, is sent as the bearer credential.)
Prints one line per check and "python-task: N passed, 0 failed"; exit 0
when all pass.
"""

import asyncio
import os
import sys
import time
from typing import Literal

import httpx2
from mcp import Client
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Request, RequestParams, Result

HEADERS = {"Authorization": "Bearer " + os.environ["SWITCHBOARD_API_KEY"]} if os.environ.get("SWITCHBOARD_API_KEY") else {}
TERMINAL = ("completed", "failed", "cancelled")
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name}: {detail}", flush=True)


class TaskCreated(Result):
    """tools/call's answer when the server made the call a task."""

    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class TaskState(Result):
    """tasks/get's answer: the task, and once it ended its tool result."""

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: CallToolResult | None = None


async def get_task(session, task_id):
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskState)


async def await_task(session, task_id, within=120.0):
    """Polls tasks/get until the task ends or within seconds pass."""
    deadline = time.monotonic() + within
    while True:
        state = await get_task(session, task_id)
        if state.status in TERMINAL or time.monotonic() > deadline:
            return state
        await asyncio.sleep((state.poll_interval_ms or 1000) / 1000)


async def resolve(created, ctx):
    """Lets client.call_tool return a task's result transparently."""
    state = await await_task(ctx.session, created.task_id)
    return state.result or CallToolResult(content=[], is_error=True)


class TasksExtension(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=resolve)]


async def create(client, nonce):
    created = await client.session.call_tool("slow_job", {"n": nonce}, allow_claimed=True)
    check("the SDK negotiated 2026-07-28", client.protocol_version == "2026-07-28", client.protocol_version)
    ok = isinstance(created, TaskCreated) and created.task_id.startswith("mcp-") and created.status == "working"
    check("tools/call is answered at once with a working task", ok, repr(created))
    if ok:
        print(f"task {created.task_id}", flush=True)


async def pending(client, task_id):
    # The instance that created the task is gone: this one may need a moment
    # to learn of it (its lookup store reads the topics), so an unknown task
    # is asked again for a while.
    deadline, state, err = time.monotonic() + 60, None, None
    while time.monotonic() < deadline:
        try:
            state = await get_task(client.session, task_id)
            break
        except MCPError as e:
            err = e
            await asyncio.sleep(0.5)
    check("tasks/get on another instance knows the task, still working",
          state is not None and state.task_id == task_id and state.status == "working" and state.result is None,
          repr(state) if state else f"no answer in 60s: {err}")


async def result(client, task_id, nonce):
    state = await await_task(client.session, task_id)
    res = state.result
    check("tasks/get on another instance: the task completed", state.status == "completed", repr(state))
    want = {"agent": "slow", "echo": {"n": nonce}}
    check("its result is the agent's answer", res is not None and not res.is_error and res.structured_content == want,
          f"want structuredContent {want}, got {res!r}")


async def main():
    step, url, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        async with httpx2.AsyncClient(headers=HEADERS, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http), extensions=[TasksExtension()]) as client:
                if step == "create":
                    await create(client, args[0])
                elif step == "pending":
                    await pending(client, args[0])
                elif step == "result":
                    await result(client, args[0], args[1])
                else:
                    check(f"step {step!r}", False, "unknown step: create, pending or result")
    except Exception as e:  # one line, not the task group's traceback
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        check(f"the {step} step against {url}", False, f"{type(e).__name__}: {e}")
    print(f"python-task: {passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed or not passed else 0)


asyncio.run(main())
