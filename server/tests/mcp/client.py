"""An MCP client for the gateway's tests, on the official Python SDK (`mcp.Client`).

Connects through `flightdeck mcp proxy` (--stdio, the rest of the command line after
`--`) or to `/mcp/{server}` (--url with --token), runs the steps given as JSON, and
prints one JSON line per event, flushed, so the test can act while a call is held:
  {"event": "calling", "label": ...}  before each call
  {"event": "called", "label": ..., "is_error": ..., "text": ..., "meta": ..., "progress": n}
"""

import argparse
import asyncio
import json
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.types import Implementation
from mcp.client.streamable_http import streamable_http_client


def say(event, **data):
    print(json.dumps({"event": event, **data}, default=str), flush=True)


async def listing(client):
    tools = await client.list_tools()
    dumped = [t.model_dump(by_alias=True, exclude_none=True) for t in tools.tools]
    say("tools", tools=dumped)
    resources = await client.list_resources()
    say("resources", uris=[str(r.uri) for r in resources.resources])
    read = await client.read_resource("notes://today")
    say("resource", text=[c.text for c in read.contents])
    prompts = await client.list_prompts()
    say("prompts", names=[p.name for p in prompts.prompts])
    prompt = await client.get_prompt("greet", {"name": "Ana"})
    say("prompt", text=[m.content.text for m in prompt.messages])
    await client.send_ping()
    say("pong")


async def call(client, step):
    label = step.get("label", step["tool"])
    say("calling", label=label)
    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    try:
        result = await client.call_tool(step["tool"], step.get("args", {}), progress_callback=on_progress,
                                        meta=step.get("meta"))
    except Exception as e:  # an MCP error (JSON-RPC error response) or a transport failure
        say("called", label=label, error=f"{type(e).__name__}: {e}", progress=len(progress))
        return
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    say("called", label=label, is_error=bool(result.is_error), text=text, meta=result.meta,
        progress=len(progress), progress_messages=progress[:3])


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--steps", required=True, help="a JSON list: \"list\" or {tool, args, label, meta}")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    a = parser.parse_args()
    steps = json.loads(a.steps)
    if a.url:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {a.token}"},
                                  timeout=httpx2.Timeout(30.0, read=600.0))
        transport = streamable_http_client(a.url, http_client=http)
    else:
        command = a.command[1:] if a.command[:1] == ["--"] else a.command
        env = {k: v for k, v in os.environ.items() if k.startswith(("FLIGHTDECK_", "RUST_", "PATH"))}
        transport = StdioServerParameters(command=command[0], args=command[1:], env=env)
    try:
        async with Client(transport, client_info=Implementation(name="gateway-test-client", version="1.0")) as client:
            say("connected", protocol=client.protocol_version)
            for step in steps:
                if step == "list":
                    await listing(client)
                elif "wait_file" in step:  # the test does something meanwhile
                    say("waiting", path=step["wait_file"])
                    while not os.path.exists(step["wait_file"]):
                        await asyncio.sleep(0.05)
                else:
                    await call(client, step)
    except BaseException as e:  # the server went away under us (the kill step)
        say("closed", error=f"{type(e).__name__}: {e}"[:500])
        return
    say("closed")


asyncio.run(main())
