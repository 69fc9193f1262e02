"""An agent whose side effects survive a crash and a re-run without firing twice.

It "sends" three emails by appending them to an outbox file (standing in for a mail
API) and asks Flightdeck before each one. Run it, kill it mid-run, run it again with the
same run id: the emails already sent are answered `already_done` and not sent again.

    FLIGHTDECK_URL=http://127.0.0.1:3000 FLIGHTDECK_TOKEN=fdk_... \
        python3 examples/guarded_agent.py --run-id demo-1 --outbox /tmp/outbox.txt --crash-after 2
    ... python3 examples/guarded_agent.py --run-id demo-1 --outbox /tmp/outbox.txt

The token needs the `calls` scope (admin -> API tokens).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "clients", "python"))

from flightdeck import Flightdeck  # noqa: E402

CUSTOMERS = ["ana@example.com", "bo@example.com", "cy@example.com"]


def send_email(outbox: str, to: str, subject: str, natural_key: str) -> str:
    """The side effect. The natural key is planted in what it creates, as the article
    advises, so a person (or a read-before-write) can find it."""
    message_id = f"msg-{natural_key}"
    with open(outbox, "a", encoding="utf-8") as f:
        f.write(f"{message_id}\t{to}\t{subject}\n")
    return message_id


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--outbox", required=True)
    parser.add_argument("--crash-after", type=int, default=0, help="exit abruptly after this many emails")
    options = parser.parse_args()
    fd = Flightdeck(os.environ["FLIGHTDECK_URL"], os.environ["FLIGHTDECK_TOKEN"])
    for step, to in enumerate(CUSTOMERS, start=1):
        args = {"to": to, "subject": "Your refund is on its way"}
        with fd.guarded("send_email", args, run_id=options.run_id, step=step) as call:
            if call.done:
                print(f"step {step}: already done ({call.external_id}), not sent again")
                continue
            # What was approved (an approver may have edited the arguments).
            approved = call.arguments
            message_id = send_email(options.outbox, approved["to"], approved["subject"], call.natural_key)
            call.complete(external_id=message_id, response={"message_id": message_id})
            print(f"step {step}: sent {message_id}")
        if options.crash_after and step == options.crash_after:
            print("crashing", flush=True)
            os._exit(3)  # no cleanup, as a killed process
    return 0


if __name__ == "__main__":
    sys.exit(main())
