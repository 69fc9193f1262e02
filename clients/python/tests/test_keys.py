"""The derived idempotency key against the shared vectors (clients/testdata/
idempotency-keys.json), which the server's and the TypeScript client's tests read too.
Needs no Flightdeck."""

import hashlib
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from flightdeck import idempotency_key  # noqa: E402
from flightdeck.client import VOLATILE_FIELDS, key_material  # noqa: E402

VECTORS = os.path.join(HERE, "..", "..", "testdata", "idempotency-keys.json")


class SharedKeyVectors(unittest.TestCase):
    def test_every_vector_gives_its_canonical_text_and_key(self):
        with open(VECTORS, encoding="utf-8") as f:
            doc = json.load(f)
        vectors = doc["vectors"]
        self.assertGreaterEqual(len(vectors), 20)
        self.assertEqual(sorted(doc["default_volatile_fields"]), sorted(VOLATILE_FIELDS))
        for v in vectors:
            with self.subTest(v["name"]):
                volatile = v.get("volatile_fields", VOLATILE_FIELDS)
                args = (v["run_id"], v["step_index"], v["tool"], v["arguments"], volatile, v["run_wide"])
                self.assertEqual(key_material(*args), v["canonical"])
                self.assertEqual(hashlib.sha256(v["canonical"].encode("utf-8")).hexdigest(), v["key"])
                self.assertEqual(idempotency_key(*args), v["key"])
