"""Exceptions raised by tierkv calls, one class per status code.

Every exception carries ``code`` (the numeric status code), ``name`` (e.g.
``"NO_SPACE"``) and the manager's message as its text. Misses that are errors
(``query``, ``remove``) raise :class:`NotFound`, which is also a ``KeyError``.
"""

from __future__ import annotations


class TierkvError(Exception):
    """Base class of every tierkv error."""

    code: int = -1
    name: str = "UNKNOWN"

    def __init__(self, message: str = "", code: int | None = None, name: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        if name is not None:
            self.name = name

    def __str__(self) -> str:
        msg = Exception.__str__(self)  # not KeyError's, which would quote it
        return f"{self.name}: {msg}" if msg else self.name


class NotFound(TierkvError, KeyError):
    """The key (or grant) does not exist (code 1)."""

    code, name = 1, "NOT_FOUND"


class Duplicated(TierkvError):
    """Put of a key that is already stored (code 2); use upsert to replace."""

    code, name = 2, "DUPLICATED"


class NoSpace(TierkvError):
    """No room can be made (code 3): everything is leased, or the value is too big."""

    code, name = 3, "NO_SPACE"


class Retry(TierkvError):
    """A transient conflict (code 4); the same call may succeed later."""

    code, name = 4, "RETRY"


class LeaseExpired(TierkvError):
    """A read lease or write grant ran out (code 5); discard the copied bytes."""

    code, name = 5, "LEASE_EXPIRED"


class InvalidArgument(TierkvError, ValueError):
    """Malformed input (code 6): empty key or tenant, size 0, ..."""

    code, name = 6, "INVALID_ARGUMENT"


class TooLarge(TierkvError, ValueError):
    """A key, value or batch over a limit, or a buffer too small (code 7)."""

    code, name = 7, "TOO_LARGE"


class ProtocolError(TierkvError):
    """A frame that could not be decoded (code 8)."""

    code, name = 8, "PROTOCOL_ERROR"


class IoError(TierkvError, OSError):
    """A socket or device error (code 9)."""

    code, name = 9, "IO_ERROR"


class Unavailable(TierkvError, ConnectionError):
    """Not connected or the connection was lost (code 10); the next call reconnects."""

    code, name = 10, "UNAVAILABLE"


class NotSupported(TierkvError):
    """Unknown operation, or one not possible on this transport (code 11)."""

    code, name = 11, "NOT_SUPPORTED"


class InternalError(TierkvError):
    """A bug in tierkv (code 12)."""

    code, name = 12, "INTERNAL"


BY_CODE: dict[int, type[TierkvError]] = {
    cls.code: cls
    for cls in (NotFound, Duplicated, NoSpace, Retry, LeaseExpired, InvalidArgument, TooLarge,
                ProtocolError, IoError, Unavailable, NotSupported, InternalError)
}


def from_code(code: int, name: str, message: str) -> TierkvError:
    """The exception instance for a status code."""
    cls = BY_CODE.get(code, TierkvError)
    return cls(message, code=code, name=name)
