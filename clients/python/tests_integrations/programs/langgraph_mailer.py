"""The LangGraph test agent, written as for agent-inbox: a fake chat model (langchain_core's
GenericFakeChatModel) asks to send one email; the tool interrupts with a HumanInterrupt
and acts on the HumanResponse. As a program it is the agent a test kills and runs again:
``python langgraph_mailer.py THREAD_ID OUTBOX [no-edit]``."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import client, maybe_die_here, send  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from flightdeck.integrations.langgraph import FlightdeckInbox  # noqa: E402

EMAIL = {"to": "ana@example.com", "subject": "Refund 77"}


def build(inbox: FlightdeckInbox, outbox: str, allow_edit: bool = True, die_after_tool: bool = False):
    seen = []
    model = GenericFakeChatModel(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "send_email", "args": dict(EMAIL), "id": "call_1"}]),
        AIMessage(content="done"),
    ]))
    deliver = inbox.guard("send_email")(lambda to, subject: send(outbox, to, subject))

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        request = {
            "action_request": {"action": "send_email", "args": {"to": to, "subject": subject}},
            "config": {"allow_accept": True, "allow_edit": allow_edit, "allow_respond": True, "allow_ignore": False},
            "description": f"Send the refund email to {to}",
        }
        response = interrupt([request])[0]
        if response["type"] == "accept":
            return deliver(to=to, subject=subject)
        if response["type"] == "edit":
            return deliver(**response["args"]["args"])
        if response["type"] == "response":
            return f"Not sent: {response['args']}"
        return "Not sent."

    def agent(state: MessagesState):
        tools_said = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
        if tools_said:
            seen.append(tools_said[-1])
            if die_after_tool:
                maybe_die_here()
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([send_email]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver()), seen


def run(fd, thread_id, outbox, allow_edit=True, die_after_tool=False):
    inbox = FlightdeckInbox(fd, wait=90)
    graph, seen = build(inbox, outbox, allow_edit, die_after_tool)
    result = inbox.run(graph, {"messages": [("user", "Send the refund email to Ana.")]},
                       {"configurable": {"thread_id": thread_id}})
    return result, seen


if __name__ == "__main__":
    thread_id, outbox = sys.argv[1:3]
    result, seen = run(client(), thread_id, outbox, die_after_tool=True)
    print(f"final: {result['messages'][-1].content}; the model saw: {seen[-1]}", flush=True)
