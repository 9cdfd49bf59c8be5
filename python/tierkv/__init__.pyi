from ._tierkv import Status as Status
from .client import Client as Client
from .namespace import derive_namespace as derive_namespace
from .errors import (BY_CODE as BY_CODE, Duplicated as Duplicated, InternalError as InternalError,
                     InvalidArgument as InvalidArgument, IoError as IoError,
                     LeaseExpired as LeaseExpired, NoSpace as NoSpace, NotFound as NotFound,
                     NotSupported as NotSupported, ProtocolError as ProtocolError, Retry as Retry,
                     TierkvError as TierkvError, TooLarge as TooLarge, Unavailable as Unavailable)
