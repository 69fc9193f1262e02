"""A local stand-in for the Anthropic Messages API, so the Claude Code CLI that the Claude
Agent SDK drives runs offline with a scripted model (ANTHROPIC_BASE_URL points here).

The script: the agent's request (the one offering the tool) is answered with one
``tool_use`` of ``tool`` with ``arguments``; once the conversation holds the tool's result,
with the text "done". Any other request the CLI makes (a title, a quota probe) gets a
short text. Every request is recorded in ``requests`` (method, path, body)."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any, Callable, Dict, List, Optional


def _sse(events: List[Dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _message(content: List[Dict[str, Any]], stop_reason: str, model: str) -> Dict[str, Any]:
    return {"id": "msg_standin", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def _stream(content: List[Dict[str, Any]], stop_reason: str, model: str) -> bytes:
    start = _message([], None, model)  # type: ignore[arg-type]
    events: List[Dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(content):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            events.append({"type": "content_block_delta", "index": i,
                           "delta": {"type": "text_delta", "text": block["text"]}})
        else:
            events.append({"type": "content_block_start", "index": i,
                           "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            events.append({"type": "content_block_delta", "index": i,
                           "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        events.append({"type": "content_block_stop", "index": i})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                   "usage": {"output_tokens": 5}})
    events.append({"type": "message_stop"})
    return _sse(events)


def tool_results(body: Dict[str, Any]) -> List[str]:
    """The text of every tool_result in a request's messages, in order."""
    out = []
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
                out.append(str(inner))
    return out


class StandIn:
    def __init__(self, tool: str, arguments: Dict[str, Any], tool_use_id: str = "toolu_standin_1",
                 on_result: Optional[Callable[[str], None]] = None):
        self.tool, self.arguments, self.tool_use_id = tool, arguments, tool_use_id
        self.on_result = on_result
        self.requests: List[Dict[str, Any]] = []
        self.seen: List[str] = []
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                standin.requests.append({"method": "POST", "path": self.path, "body": body})
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    return self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"stand-in"}}')
                content, stop = standin.reply(body)
                model = body.get("model", "claude-standin")
                if body.get("stream"):
                    self._send(200, _stream(content, stop, model), "text/event-stream")
                else:
                    self._send(200, json.dumps(_message(content, stop, model)).encode())

            def do_GET(self):  # noqa: N802
                standin.requests.append({"method": "GET", "path": self.path, "body": None})
                self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"stand-in"}}')

            do_HEAD = do_GET  # noqa: N815

            def _send(self, status: int, data: bytes, kind: str = "application/json"):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", "req_standin")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(self, body: Dict[str, Any]):
        offers_tool = any(t.get("name") == self.tool for t in body.get("tools") or [])
        if not offers_tool:
            return [{"type": "text", "text": "ok"}], "end_turn"
        results = tool_results(body)
        if not results:
            return [{"type": "tool_use", "id": self.tool_use_id, "name": self.tool, "input": self.arguments}], "tool_use"
        self.seen.append(results[-1])
        if self.on_result is not None:
            self.on_result(results[-1])
        return [{"type": "text", "text": "done"}], "end_turn"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


#: The environment that keeps the CLI on the stand-in and off the network.
def offline_env(url: str, home: str) -> Dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key",
        "HOME": home,
        "CLAUDE_CONFIG_DIR": home + "/.claude",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        "CLAUDE_CODE_SKIP_AUTO_UPDATE": "1",
        "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
        "CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1",
        # Offer MCP tools directly rather than behind a tool search the script would
        # have to play.
        "ENABLE_TOOL_SEARCH": "false",
    }
