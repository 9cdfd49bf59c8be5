"""tierkv: Python client of the tierkv KV-cache store.

    import tierkv
    with tierkv.Client("unix:/tmp/tierkv.sock") as kv:
        kv.put("layer0/block42", block)           # any buffer: bytes, numpy, ...
        n = kv.get_into("layer0/block42", out)    # straight into your buffer

See docs/python.md.
"""

from __future__ import annotations

from . import _tierkv
from .client import Client
from .namespace import derive_namespace
from .errors import (BY_CODE, Duplicated, InternalError, InvalidArgument, IoError, LeaseExpired,
                     NoSpace, NotFound, NotSupported, ProtocolError, Retry, TierkvError, TooLarge,
                     Unavailable, from_code)

Status = _tierkv.Status
ValueView = _tierkv.ValueView
RegisteredBuffer = _tierkv.RegisteredBuffer

_tierkv._set_error_factory(from_code)

__all__ = [
    "Client", "derive_namespace", "Status", "ValueView", "RegisteredBuffer", "TierkvError", "NotFound", "Duplicated", "NoSpace", "Retry",
    "LeaseExpired", "InvalidArgument", "TooLarge", "ProtocolError", "IoError", "Unavailable",
    "NotSupported", "InternalError", "BY_CODE",
]
