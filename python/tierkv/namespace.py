"""Storage namespaces: the identity of an engine's KV cache bytes."""

from __future__ import annotations

import hashlib
import json


def derive_namespace(**inputs: str) -> str:
    """``tierkv:v1:`` and the SHA-256 (lowercase hex) of the canonical JSON of
    ``inputs``: what determines the cached bytes, such as the model artifacts,
    the computation, the representation and the state group. Canonical: keys
    sorted, no spaces, UTF-8 kept as is. The C++ ``tierkv::DeriveNamespace``
    gives the same string for the same inputs.

    >>> derive_namespace(model="m", dtype="bf16").startswith("tierkv:v1:")
    True
    """
    for k, v in inputs.items():
        if not isinstance(v, str):
            raise TypeError(f"namespace input {k!r} must be a str, not {type(v).__name__}")
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "tierkv:v1:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
