"""A real Flightdeck for the adapters' tests, and an approver who decides over HTTP.

``Server`` starts ``$FLIGHTDECK_BIN`` on free ports with a fresh data directory and the
tool policies the test gives, with an agent token (scopes calls, approvals, escalations,
read) and a person, alice, who may approve. ``Approver`` signs in as alice and decides
exactly as the request page does (``/fn/decide_approval`` with the hash shown).
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.dirname(HERE)
sys.path.insert(0, CLIENT)

from flightdeck import Flightdeck  # noqa: E402

PASSWORD = "pw-long-enough-for-tests-123"

#: The tools the tests use: what needs a person, and a short call timeout for the
#: unknown-outcome test.
POLICIES = """
[[tool_policies]]
pattern = "send_email"
side_effect = "irreversible"
requires_approval = true
expiry_seconds = 120

[[tool_policies]]
pattern = "refund"
side_effect = "irreversible"
requires_approval = true
expiry_seconds = 120

[[tool_policies]]
pattern = "write_outbox"
side_effect = "write"
requires_approval = true
expiry_seconds = 120

[[tool_policies]]
pattern = "mcp__outbox__send_email"
side_effect = "irreversible"
requires_approval = true
expiry_seconds = 120

[[tool_policies]]
pattern = "post_note"
side_effect = "write"
requires_approval = false
call_timeout_seconds = 2
"""


_handed_out: set = set()


def free_port() -> int:
    """A port nothing listens on, never one this process handed out before: the kernel
    may give a just-released port again, and a server started with the same port for two
    listeners exits at start."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def binary() -> str:
    path = os.environ.get("FLIGHTDECK_BIN")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("set FLIGHTDECK_BIN to the Flightdeck server binary (cargo build)")
    return path


class Server:
    def __init__(self, policies: str = POLICIES):
        self.dir = tempfile.mkdtemp(prefix="fd-it-")
        self.data = os.path.join(self.dir, "data")
        site = os.path.join(self.dir, "site")
        os.makedirs(self.data)
        os.makedirs(site)
        self.env = dict(os.environ, FLIGHTDECK_DATA_DIR=self.data, FLIGHTDECK_SITE_ROOT=site, RUST_LOG="warn")
        self.env.pop("DATABASE_URL", None)
        self.config = os.path.join(self.dir, "flightdeck.toml")
        with open(self.config, "w") as f:
            f.write(policies)
        bin_ = binary()
        self.token = self._cli(["token", "create", "agent", "--scope", "calls,approvals,escalations,read"]).strip()
        self._cli(["user", "add", "--role", "admin,approver,operator,viewer", "alice"], stdin=PASSWORD + "\n")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        self.process = subprocess.Popen(
            [bin_, "--config", self.config, "serve", "--listen", f"127.0.0.1:{self.port}",
             "--otlp-http-listen", f"127.0.0.1:{free_port()}", "--otlp-grpc-listen", f"127.0.0.1:{free_port()}"],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"Flightdeck exited at start:\n{self.output()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"Flightdeck not ready after 60 s:\n{self.output()}")
            time.sleep(0.1)

    def _cli(self, args: List[str], stdin: Optional[str] = None) -> str:
        done = subprocess.run([binary(), "--config", self.config] + args, input=stdin, capture_output=True,
                              text=True, env=self.env, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"flightdeck {' '.join(args)}: {done.stderr}")
        return done.stdout

    def output(self) -> str:
        self.log.flush()
        with open(os.path.join(self.dir, "server.log"), encoding="utf-8", errors="replace") as f:
            return f.read()[-4000:]

    def client(self, **kw: Any) -> Flightdeck:
        return Flightdeck(self.url, self.token, **kw)

    def env_for_agent(self) -> Dict[str, str]:
        return {"FLIGHTDECK_URL": self.url, "FLIGHTDECK_TOKEN": self.token}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Approver:
    """alice, signed in with a cookie jar, deciding as the request page does."""

    def __init__(self, server: Server, username: str = "alice"):
        self.server = server
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self._fn("login", {"username": username, "password": PASSWORD, "next": "/runs"}, allow_redirect=True)

    def _fn(self, name: str, form: Dict[str, Any], allow_redirect: bool = False) -> Any:
        data = urllib.parse.urlencode({k: v for k, v in form.items() if v is not None}).encode()
        request = urllib.request.Request(f"{self.server.url}/fn/{name}", data=data, method="POST")
        request.add_header("sec-fetch-site", "same-origin")
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        request.add_header("Accept", "application/json")
        try:
            with self.opener.open(request, timeout=30) as r:
                body = r.read()
        except urllib.error.HTTPError as e:
            raise AssertionError(f"/fn/{name}: {e.code} {e.read()[:500]!r}") from None
        try:
            return json.loads(body) if body else None
        except ValueError:
            return body.decode(errors="replace")

    def inbox(self) -> List[Dict[str, Any]]:
        """The pending requests, as the inbox lists them."""
        return self._fn("load_inbox", {})["pending"]

    def wait_for_request(self, tool: str, timeout: float = 30.0) -> Dict[str, Any]:
        """The first pending request for ``tool`` to show in the inbox."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for request in self.inbox():
                if request["tool"] == tool:
                    return request
            time.sleep(0.1)
        raise AssertionError(f"no request for {tool} reached the inbox in {timeout} s")

    def decide(self, request: Dict[str, Any], decision: str, reason: Optional[str] = None,
               respond: Optional[str] = None, arguments: Optional[Dict[str, Any]] = None) -> Any:
        return self._fn("decide_approval", {
            "id": request["id"], "decision": decision, "payload_sha256": request["payload_sha256"],
            "reason": reason, "respond": respond,
            "arguments": json.dumps(arguments) if arguments is not None else None})

    def approve(self, tool: str, **kw: Any) -> Dict[str, Any]:
        request = self.wait_for_request(tool)
        self.decide(request, "approve", **kw)
        return request

    def deny(self, tool: str, reason: str) -> Dict[str, Any]:
        request = self.wait_for_request(tool)
        self.decide(request, "deny", reason=reason)
        return request

    def edit(self, tool: str, arguments: Dict[str, Any], respond: Optional[str] = None) -> Dict[str, Any]:
        request = self.wait_for_request(tool)
        self.decide(request, "approve", arguments=arguments, respond=respond)
        return request

    def run_calls(self, run_id: str) -> List[Dict[str, Any]]:
        """The run's guarded calls, as the run page lists them."""
        return [c["entry"] for c in self._fn("load_run_calls", {"run_id": run_id})]

    def settle(self, call_id: str, happened: bool, external_id: Optional[str] = None) -> Any:
        return self._fn("settle_call", {"id": call_id, "happened": "yes" if happened else "no",
                                        "external_id": external_id})
