#!/usr/bin/env python3
"""Prints a JSON API response of about N bytes (default 10240): a page of
records such as a catalogue or user API returns, deterministic (a fixed
seed), so compression ratios compare between runs."""
import json
import random
import sys

size = int(sys.argv[1]) if len(sys.argv) > 1 else 10240
rng = random.Random(20)
words = ["alpha", "bravo", "cedar", "delta", "ember", "fjord", "grove", "harbor", "indigo", "juniper",
         "kestrel", "lumen", "maple", "nectar", "onyx", "prairie", "quartz", "raven", "sierra", "tundra"]
items = []
while True:
    n = len(items) + 1
    items.append({
        "id": 100000 + n * 7,
        "sku": "SKU-%06d" % rng.randrange(1000000),
        "name": " ".join(rng.choice(words).title() for _ in range(3)),
        "price": {"amount": round(rng.uniform(1, 500), 2), "currency": "EUR"},
        "in_stock": rng.random() > 0.2,
        "tags": rng.sample(words, 3),
        "updated_at": "2026-%02d-%02dT%02d:%02d:%02dZ" % (rng.randint(1, 12), rng.randint(1, 28),
                                                          rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)),
    })
    text = json.dumps({"page": 1, "per_page": len(items), "items": items}, indent=1)
    if len(text) >= size:
        break
sys.stdout.write(text)
