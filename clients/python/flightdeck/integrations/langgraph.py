"""Flightdeck for LangGraph (tested with langgraph 1.2.22, langchain-core 1.8.1).

A graph written for agent-inbox keeps its code: it calls ``interrupt([HumanInterrupt])``
(``action_request`` {action, args}, ``config`` {allow_accept, allow_edit, allow_respond,
allow_ignore}, ``description``) and acts on the HumanResponse it gets back. Flightdeck
takes agent-inbox's place:

    inbox = FlightdeckInbox(fd)                      # scope: calls; run id = thread_id
    deliver = inbox.guard("send_email")(really_send)  # the side effect, in the graph
    result = inbox.run(graph, {"messages": [...]}, {"configurable": {"thread_id": "t-77"}})

``run`` invokes the graph and answers each interrupt from Flightdeck: the approver sees
the action, every argument and the description in the inbox (or Slack), and the graph
is resumed with a HumanResponse it already understands: ``accept``; ``edit`` with the
edited args (only where ``allow_edit``: otherwise the edit is refused, nothing runs, and
the graph gets a ``response`` saying so); ``response`` with the denial's reason (or
``ignore`` where only that is allowed). The guarded side effect runs what was approved,
once; a re-run of the thread (same thread_id) whose call was already done is answered
``accept`` and the side effect returns its cached result without running again.

The run id is the thread id unless ``run_id`` is given; the step is the action's position
among the thread's guarded calls, in the order they are first seen.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional

from langgraph.types import Command

from ..client import CallDenied, Flightdeck, canonical_json
from ._common import GuardedRun

__all__ = ["FlightdeckInbox", "human_response"]


def _requests(value: Any) -> List[Dict[str, Any]]:
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not (isinstance(item, Mapping) and isinstance(item.get("action_request"), Mapping)):
            raise ValueError(f"not a HumanInterrupt (agent-inbox schema): {item!r}")
    return [dict(item) for item in items]


def _display(request: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """What agent-inbox shows, for the approver: the description, what may be done, and
    each argument."""
    config = request.get("config") or {}
    allowed = [name for name in ("accept", "edit", "respond", "ignore") if config.get(f"allow_{name}")]
    fields = []
    if request.get("description"):
        fields.append({"label": "Description", "value": str(request["description"])})
    fields.append({"label": "Allowed", "value": ", ".join(allowed) or "nothing"})
    for name, value in (request["action_request"].get("args") or {}).items():
        text = value if isinstance(value, str) else canonical_json(value)
        fields.append({"label": name, "value": text, "argument": name})
    return fields


def human_response(request: Mapping[str, Any], decision: Any) -> Dict[str, Any]:
    """The HumanResponse for a Flightdeck decision, within what the request allows."""
    config = request.get("config") or {}
    action = request["action_request"]
    if decision.approved:
        if decision.changed:
            return {"type": "edit", "args": {"action": action["action"], "args": decision.arguments}}
        if config.get("allow_accept", True):
            return {"type": "accept", "args": None}
        return {"type": "edit", "args": {"action": action["action"], "args": dict(action.get("args") or {})}}
    if config.get("allow_respond"):
        return {"type": "response", "args": decision.message}
    if config.get("allow_ignore"):
        return {"type": "ignore", "args": None}
    raise CallDenied(decision.message or "denied", decision.message, decision.call)


class FlightdeckInbox:
    """Answers a graph's HumanInterrupts from Flightdeck and guards its side effects."""

    def __init__(self, fd: Flightdeck, run_id: Optional[str] = None, *, wait: float = 300.0,
                 agent: Optional[str] = None):
        self.fd, self.run_id, self.wait, self.agent = fd, run_id, wait, agent
        self._runs: Dict[str, GuardedRun] = {}
        self._shown: Dict[str, List[Dict[str, Any]]] = {}

    def ledger(self, config: Optional[Mapping[str, Any]] = None) -> GuardedRun:
        run_id = self.run_id
        if run_id is None:
            if config is None:
                from langgraph.config import get_config

                config = get_config()
            run_id = ((config or {}).get("configurable") or {}).get("thread_id")
        if not run_id:
            raise ValueError("FlightdeckInbox needs a run_id or a thread_id in the graph's config")
        if run_id not in self._runs:
            self._runs[run_id] = GuardedRun(self.fd, run_id, wait=self.wait, agent=self.agent,
                                            display=lambda tool, args: self._shown.get(canonical_json([tool, args])))
        return self._runs[run_id]

    def answer(self, value: Any, config: Mapping[str, Any], interrupt_id: str = "") -> List[Dict[str, Any]]:
        """The HumanResponses for one interrupt's value (a list of HumanInterrupts),
        after Flightdeck's decision (this waits for the person)."""
        ledger = self.ledger(config)
        responses = []
        for i, request in enumerate(_requests(value)):
            action = request["action_request"]
            tool, args = action["action"], dict(action.get("args") or {})
            self._shown[canonical_json([tool, args])] = _display(request)
            can_edit = bool((request.get("config") or {}).get("allow_edit"))
            decision = ledger.decide(tool, args, f"{interrupt_id}:{i}", can_edit=can_edit)
            responses.append(human_response(request, decision))
        return responses

    def resume(self, graph: Any, config: Mapping[str, Any]) -> Optional[Command]:
        """The Command that resumes the graph's pending interrupts, or None."""
        interrupts = graph.get_state(config).interrupts
        if not interrupts:
            return None
        return Command(resume={i.id: self.answer(i.value, config, i.id) for i in interrupts})

    def run(self, graph: Any, input: Any, config: Mapping[str, Any], **kwargs: Any) -> Any:
        """``graph.invoke`` until it ends, answering its interrupts from Flightdeck."""
        result = graph.invoke(input, config, **kwargs)
        while True:
            command = self.resume(graph, config)
            if command is None:
                return result
            result = graph.invoke(command, config, **kwargs)

    def guard(self, tool: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator for the side effect inside the graph: called with the arguments
        as keywords, it runs once for the approved call (the approved arguments) and
        returns the cached result when the call was already done."""

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            def guarded(**arguments: Any) -> Any:
                ledger = self.ledger()
                call_id = f"run:{tool}:{canonical_json(arguments)}"
                return ledger.execute(tool, arguments, call_id, lambda approved: func(**approved))

            guarded.__name__ = getattr(func, "__name__", tool)
            guarded.__doc__ = func.__doc__
            return guarded

        return decorate
