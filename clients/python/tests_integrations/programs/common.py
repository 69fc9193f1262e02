"""What the test agents share: the side effect (a line in an outbox file), the moment a
test kills the process, and the client from the environment."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from flightdeck import Flightdeck  # noqa: E402


def client() -> Flightdeck:
    return Flightdeck(os.environ["FLIGHTDECK_URL"], os.environ["FLIGHTDECK_TOKEN"])


def send(outbox: str, to: str, subject: str) -> str:
    """The side effect: one line per email actually sent."""
    with open(outbox, "a", encoding="utf-8") as f:
        f.write(f"{to}\t{subject}\n")
    return f"sent to {to}"


def lines(outbox: str) -> list:
    if not os.path.exists(outbox):
        return []
    with open(outbox, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def maybe_die_here() -> None:
    """With FD_TEST_MARKER set, says "kill me now" (creates the file) and waits to be
    killed: the agent dies after the tool ran and reported, before the run finished."""
    marker = os.environ.get("FD_TEST_MARKER")
    if marker:
        open(marker, "w").close()
        time.sleep(600)
