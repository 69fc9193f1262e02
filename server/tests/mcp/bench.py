"""Latency of a tools/call that needs no person, direct and through the gateway.

Runs N calls of `read_file` (read-only: forwarded at once) and N of `append_line` (a
write with fresh arguments each time: asked of the ledger, forwarded, reported) with the
official SDK client, against upstream.py directly over stdio, through
`flightdeck mcp proxy`, or through /mcp/{server}; prints one JSON line per series with
p50 and p99 in milliseconds. Driven by server/benches/mcp_gateway.rs.
"""

import argparse
import asyncio
import json
import os
import time

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def quantile(sorted_ms, q):
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if a.url:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {a.token}"}, timeout=httpx2.Timeout(60.0))
        transport = streamable_http_client(a.url, http_client=http)
    else:
        command = a.command[1:] if a.command[:1] == ["--"] else a.command
        env = {k: v for k, v in os.environ.items() if k.startswith(("FLIGHTDECK_", "RUST_", "PATH"))}
        transport = StdioServerParameters(command=command[0], args=command[1:], env=env)
    # mode="legacy": the same handshake direct and through the gateway.
    async with Client(transport, mode="legacy") as client:
        for tool, args in (("read_file", lambda i: {"path": f"/f/{i}"}), ("append_line", lambda i: {"text": f"line {i}"})):
            for i in range(20):  # warm up
                await client.call_tool(tool, args(-1 - i))
            took = []
            for i in range(a.calls):
                t0 = time.perf_counter()
                result = await client.call_tool(tool, args(i))
                took.append((time.perf_counter() - t0) * 1000)
                assert not result.is_error, result
            took.sort()
            print(json.dumps({"mode": a.mode, "tool": tool, "calls": a.calls,
                              "p50_ms": round(quantile(took, 0.50), 2), "p99_ms": round(quantile(took, 0.99), 2)}),
                  flush=True)


asyncio.run(main())
