"""The order events bench/append.py and bench/query.py write and read.

Imported by the bench scripts; running it directly does nothing (`make bench` runs every
bench/*.py file).
"""

from __future__ import annotations

import json

PERSISTENCE_IDS = 1000


def payload(i: int) -> dict[str, object]:
    """About 100 bytes as compact JSON."""
    return {
        "order_id": f"order-{i:08d}",
        "amount": 1000 + i % 9000,
        "currency": "EUR",
        "items": [{"sku": f"s{i % 50:03d}", "qty": 1 + i % 3, "price": 1999}],
    }


def payload_bytes(i: int) -> bytes:
    """payload(i) as compact JSON."""
    return json.dumps(payload(i), separators=(",", ":")).encode()


def persistence_id(append_nr: int) -> str:
    """Appends go to the persistence ids round-robin."""
    return f"order-{append_nr % PERSISTENCE_IDS:04d}"
