"""Checks Switchboard's /mcp with the official Python SDK (mcp, pinned in
requirements.txt), as an MCP user would: list the tools with their
schemas, call echo (answered), fraud_check (fallback, flagged), a call with
an invalid argument (the schema error names the path), a progress-sending
agent (notifications/progress before the result), cancel a slow call,
and create a task and get its result.

Usage: python python_client.py http://127.0.0.1:8080/mcp
(SWITCHBOARD_API_KEY, when set, is sent as the bearer credential.)
Exit 0 and one line "python-client: N passed, 0 failed" when all pass.
"""

import asyncio
import json
import os
import sys
import uuid

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = sys.argv[1]
HEADERS = {"Authorization": "Bearer " + os.environ["SWITCHBOARD_API_KEY"]} if os.environ.get("SWITCHBOARD_API_KEY") else {}
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def text_of(res):
    return "".join(getattr(c, "text", "") for c in res.content)


def meta_of(res):
    m = getattr(res, "meta", None) or getattr(res, "_meta", None) or {}
    return dict(m)


async def raw(http, method, params, extensions=None):
    """One 2026-07-28 request, as the wire has it (for tasks: this SDK
    version has no tasks client)."""
    caps = {"extensions": extensions} if extensions else {}
    params = dict(params)
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "python-check", "version": "1"},
    }
    name = params.get("name") or params.get("taskId")
    hdr = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, **HEADERS}
    if name:
        hdr["Mcp-Name"] = name
    r = await http.post(URL, headers=hdr, json={"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params})
    body = r.text
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        body = next(l[6:] for l in body.splitlines() if l.startswith("data: ") and '"id"' in l)
    return json.loads(body)


async def main():
    nonce = uuid.uuid4().hex
    async with httpx2.AsyncClient(headers=HEADERS, timeout=60) as http:
        async with Client(streamable_http_client(URL, http_client=http)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            echo = tools.get("echo")
            check("tools/list lists echo with its schemas",
                  echo is not None and echo.input_schema.get("required") == ["text"] and (echo.output_schema or {}).get("type") == "object",
                  repr(echo))
            check("tools/list carries fraud_check's minimum",
                  "fraud_check" in tools and tools["fraud_check"].input_schema["properties"]["amount"].get("minimum") == 0, repr(tools.get("fraud_check")))

            res = await client.call_tool("echo", {"text": "hello from python", "nonce": nonce})
            sc = res.structured_content or {}
            check("echo is answered", not res.is_error and sc.get("echo", {}).get("text") == "hello from python"
                  and meta_of(res).get("outcome") == "answered", repr(res))

            res = await client.call_tool("fraud_check", {"amount": 12, "nonce": nonce})
            m = meta_of(res)
            check("fraud_check falls back, flagged", not res.is_error and m.get("fallback") is True
                  and m.get("outcome") == "fallback_static" and "review" in text_of(res), repr(res))

            # A progress-sending agent: the writer streams words as progress.
            reports = []

            async def on_progress(progress, total, message):
                reports.append((progress, total, message))

            res = await client.call_tool("test_tool_with_progress", {"nonce": nonce}, progress_callback=on_progress)
            values = [p for p, _, _ in reports]
            check("progress notifications arrive before the result, increasing",
                  not res.is_error and len(reports) >= 3 and values == sorted(values) and reports[-1][1]
                  and "text" in json.dumps(res.structured_content or {}), f"{len(reports)} reports {reports[:3]} {res!r}")

            res = await client.call_tool("fraud_check", {"amount": -5, "nonce": nonce})
            check("an invalid argument is a tool error naming the path", res.is_error and "/amount" in text_of(res), repr(res))

            # Cancel a slow call: the intent resolves cancelled.
            job = {"demo": {"delay_ms": 20000}, "nonce": nonce}
            with anyio.move_on_after(1.5):
                await client.call_tool("slow_job", job)
            cancelled = False
            for _ in range(100):
                listing = await http.get(URL.rsplit("/mcp", 1)[0] + "/v1/intent-types", headers=HEADERS)
                counts = next((t["counts"] for t in listing.json()["intent_types"] if t["name"] == "slow_job"), {})
                if counts.get("by_outcome", {}).get("cancelled", 0) > 0:
                    cancelled = True
                    break
                await asyncio.sleep(0.1)
            check("a cancelled slow call resolves cancelled", cancelled, "no cancelled slow_job intent")

        # A task (2026-07-28 tasks extension): created at once, its
        # result read with tasks/get.
        created = await raw(http, "tools/call", {"name": "echo", "arguments": {"text": "as a task", "nonce": nonce}},
                            extensions={"io.modelcontextprotocol/tasks": {}})
        task = created.get("result", {})
        check("a task is created", task.get("resultType") == "task" and task.get("taskId"), repr(created))
        status, got = None, None
        for _ in range(100):
            got = await raw(http, "tasks/get", {"taskId": task.get("taskId", "")}, extensions={"io.modelcontextprotocol/tasks": {}})
            status = got.get("result", {}).get("status")
            if status in ("completed", "failed", "cancelled"):
                break
            await asyncio.sleep(0.1)
        result = (got or {}).get("result", {}).get("result", {})
        check("tasks/get returns the task's result", status == "completed" and "as a task" in json.dumps(result), repr(got))

    print(f"python-client: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


asyncio.run(main())
