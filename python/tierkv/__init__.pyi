from typing import Any, Iterable, Sequence, Union

from .client import Client as Client
from .errors import (BY_CODE as BY_CODE, Duplicated as Duplicated, InternalError as InternalError,
                     InvalidArgument as InvalidArgument, IoError as IoError,
                     LeaseExpired as LeaseExpired, NoSpace as NoSpace, NotFound as NotFound,
                     NotSupported as NotSupported, ProtocolError as ProtocolError, Retry as Retry,
                     TierkvError as TierkvError, TooLarge as TooLarge, Unavailable as Unavailable)

class Status:
    """Outcome of one item of a batch call; truthy when OK."""
    code: int
    message: str
    size: int
    @property
    def ok(self) -> bool: ...
    @property
    def name(self) -> str: ...
    def __bool__(self) -> bool: ...
