"""An MCP server for the gateway's tests, on the official Python SDK (MCPServer).

Its tools write what they do to --outbox, one JSON line per execution, so a test counts
executions of the upstream itself:
  read_file      readOnlyHint: never through the ledger
  append_line    writes, not destructively (a `write` by its annotations)
  send_email     destructive: a policy makes it need approval
  wire_money     destructive: a policy whose approvals expire at once
  slow_write     writes its pid to --outbox + ".pid", then sleeps: the test kills it
  unclassified   no annotations at all
Runs over stdio (default) or Streamable HTTP (--port).
"""

import argparse
import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

parser = argparse.ArgumentParser()
parser.add_argument("--outbox", required=True)
parser.add_argument("--port", type=int)
args = parser.parse_args()

server = MCPServer(name="gateway-test-upstream", version="1.0.0", instructions="test server")


def record(tool, **arguments):
    with open(args.outbox, "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True) + "\n")
    with open(args.outbox, encoding="utf-8") as f:
        return sum(1 for _ in f)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True), meta={"io.example/unknown": {"kept": [1, 2]}})
def read_file(path: str) -> str:
    """Reads a file (pretend)."""
    return f"contents of {path}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False))
def append_line(text: str) -> str:
    """Appends a line to the outbox."""
    n = record("append_line", text=text)
    return f"appended; the outbox has {n} lines"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def send_email(to: str, body: str) -> str:
    """Sends an email (to the outbox)."""
    record("send_email", to=to, body=body)
    return f"sent to {to}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def wire_money(amount: int) -> str:
    """Wires money (to the outbox)."""
    record("wire_money", amount=amount)
    return f"wired {amount}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def slow_write(seconds: float) -> str:
    """Starts writing, then takes its time: long enough to be killed."""
    with open(args.outbox + ".pid", "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    record("slow_write", seconds=seconds)
    time.sleep(seconds)
    return "written"


@server.tool()
def unclassified(x: int) -> str:
    """A tool nobody classified."""
    record("unclassified", x=x)
    return str(x)


@server.resource("notes://today", mime_type="text/plain")
def today() -> str:
    return "buy milk"


@server.prompt()
def greet(name: str) -> str:
    return f"Say hello to {name}."


if args.port:
    import anyio

    anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=args.port))
else:
    server.run("stdio")
