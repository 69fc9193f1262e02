"""Writes idempotency-keys.json beside this file: the derived-key test vectors that the
server's tests and both clients' tests read.

    python3 clients/testdata/make_idempotency_keys.py

The key and the canonical text come from the Python client's function
(clients/python/flightdeck/client.py), which is the article's `json.dumps(...,
sort_keys=True, separators=(",", ":"), ensure_ascii=False)`. The file is written
ASCII-only (non-ASCII as \\u escapes) so no editor can normalize or drop a character.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from flightdeck.client import VOLATILE_FIELDS, idempotency_key, key_material  # noqa: E402

# (name, run_id, step_index, tool, arguments, volatile_fields or None, run_wide)
VECTORS = [
    ("the article's example", "run-1", 3, "send_email", {"to": "ana@example.com", "now": 1}, None, False),
    ("key order: sorted by code point, capitals and _ before lower case", "run-1", 1, "create_ticket",
     {"zeta": 1, "alpha": 2, "Mid": 3, "_under": 4, "a": 5, "A": 6, "10": 7, "9": 8}, None, False),
    ("nested objects sorted at every level, arrays keep their order", "run-1", 2, "place_order",
     {"order": {"lines": [{"sku": "B", "qty": 2}, {"qty": 1, "sku": "A"}], "customer": {"name": "Ana", "id": 7}}},
     None, False),
    ("arrays: order kept, empty and nested", "run-1", 4, "tag",
     {"tags": ["b", "a", "c"], "matrix": [[3, 1], [], [{}]], "empty": [], "obj": {}}, None, False),
    ("deep nesting", "run-1", 5, "deep", {"a": {"c": {"e": {"g": [1, {"z": "y", "h": "i"}]}, "d": 0}, "b": None}},
     None, False),
    ("accents, precomposed and combining (no normalization)", "run-1", 6, "send_email",
     {"name": "Jos\u00e9 M\u00fcller", "city": "Zu\u0308rich", "\u00e9t\u00e9": "summer"}, None, False),
    ("CJK values and keys", "run-1", 7, "send_email",
     {"subject": "\u8acb\u6c42\u66f8 77", "\u5b9b\u5148": "\u7530\u4e2d", "\ud55c\uad6d\uc5b4": "\u3042"}, None, False),
    ("emoji (outside the BMP) in values and keys", "run-1", 8, "post_message",
     {"text": "refund on its way \U0001F4B8", "\U0001F44D": True, "flag": "\U0001F1EB\U0001F1F7"}, None, False),
    ("code point order is not UTF-16 order: U+FF01 sorts before U+1F600", "run-1", 9, "sort_check",
     {"\U0001F600": "grin", "\uff01": "fullwidth !", "\ue000": "private use", "z": "ascii",
      "\U00010000": "first astral"}, None, False),
    ("quotes, backslashes and a slash (not escaped), no HTML escaping", "run-1", 10, "write_file",
     {"path": "C:\\temp\\new\\x.txt", "say": "she said \"hi\"", "url": "https://example.com/a?b=c&d=<e>'f'"},
     None, False),
    ("short escapes: \\n \\r \\t \\b \\f", "run-1", 11, "write_file",
     {"body": "line 1\nline 2\r\n\tindented\bback\fform"}, None, False),
    ("other control characters as lowercase \\u00XX; DEL raw", "run-1", 12, "write_file",
     {"ctl": "\u0000\u0001\u0007\u000b\u000e\u001b\u001f", "del": "\u007f", "c1": "\u0085\u009f"}, None, False),
    ("U+2028, U+2029 and other invisible characters raw", "run-1", 13, "write_file",
     {"seps": "a\u2028b\u2029c", "invisible": "zero\u200bwidth\u00a0nbsp\ufeffbom"}, None, False),
    ("escapes in keys", "run-1", 14, "odd_keys", {"a\"b": 1, "back\\slash": 2, "new\nline": 3, "tab\tkey": 4, "": 5},
     None, False),
    ("integers: zero, negative, 2^53-1", "run-1", 15, "charge",
     {"zero": 0, "negative": -42, "max_safe": 9007199254740991, "min_safe": -9007199254740991, "one": 1},
     None, False),
    ("plain-decimal floats", "run-1", 16, "charge", {"half": 0.5, "negative": -3.75, "price": 19.99, "tenth": 0.1},
     None, False),
    ("booleans and null", "run-1", 17, "flags", {"yes": True, "no": False, "nothing": None, "list": [True, None, False]},
     None, False),
    ("empty arguments", "run-1", 18, "ping", {}, None, False),
    ("step 0", "run-1", 0, "ping", {"n": 1}, None, False),
    ("default volatile fields dropped at the top level only", "run-1", 19, "send_email",
     {"to": "bo@example.com", "request_id": "r-1", "timestamp": "2024-05-01T10:00:00Z", "now": 1714557600,
      "attempt": 2, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "meta": {"request_id": "kept", "now": "kept"}},
     None, False),
    ("only volatile fields: the arguments become {}", "run-1", 20, "send_email",
     {"request_id": "r-9", "attempt": 1}, None, False),
    ("custom volatile fields replace the default list", "run-1", 21, "send_email",
     {"to": "cy@example.com", "nonce": "n-1", "sent_at": "10:00", "request_id": "kept: not in the policy's list"},
     ["nonce", "sent_at"], False),
    ("an empty volatile list keeps every field", "run-1", 22, "send_email",
     {"to": "cy@example.com", "now": 5, "attempt": 1}, [], False),
    ("run-wide: the step is left out", "run-1", 23, "refund", {"order": "o-1", "amount": 500}, None, True),
    ("run-wide with custom volatile fields", "run-1", 24, "refund",
     {"order": "o-2", "amount": 50, "idem": "x", "now": "kept"}, ["idem"], True),
    ("unicode in run id and tool", "run-\u00fc-\u4e2d-\U0001F680", 25, "envoyer_\u00e9", {"x": "y"}, None, False),
]


def main() -> None:
    vectors = []
    for name, run_id, step, tool, arguments, volatile, run_wide in VECTORS:
        fields = VOLATILE_FIELDS if volatile is None else volatile
        v = {"name": name, "run_id": run_id, "step_index": step, "tool": tool, "arguments": arguments}
        if volatile is not None:
            v["volatile_fields"] = volatile
        v["run_wide"] = run_wide
        v["canonical"] = key_material(run_id, step, tool, arguments, fields, run_wide)
        v["key"] = idempotency_key(run_id, step, tool, arguments, fields, run_wide)
        vectors.append(v)
    doc = {
        "about": (
            "Derived idempotency keys (docs/ledger.md): key = hex SHA-256 of the UTF-8 bytes of `canonical`, "
            "the canonical JSON of {args: arguments without the top-level volatile_fields (default "
            + ", ".join(sorted(VOLATILE_FIELDS))
            + "), run: run_id, step: step_index (left out when run_wide), tool}. Written by "
            "clients/testdata/make_idempotency_keys.py; read by the server's, the Python and the TypeScript tests."
        ),
        "default_volatile_fields": ["request_id", "timestamp", "now", "attempt", "trace_id"],
        "vectors": vectors,
    }
    path = os.path.join(HERE, "idempotency-keys.json")
    with open(path, "w", encoding="ascii", newline="\n") as f:
        json.dump(doc, f, indent=2, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {len(vectors)} vectors to {path}")


if __name__ == "__main__":
    main()
