"""The one JSON text form CDC stores: keys, cells, rows and states as compact JSON.

Keys are compared and hashed as text (routing, state buckets, the sink's key column), so every
writer must produce the same text for the same value: compact separators, ASCII escapes, the
given key order.
"""

from __future__ import annotations

import json

compact_json = json.JSONEncoder(separators=(",", ":")).encode
"""Compact JSON with one encoder for every call (json.dumps with options builds one per call)."""
