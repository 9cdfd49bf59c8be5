"""A stand-in for ``sglang.srt.mem_cache.hicache_storage``, written for the
tierkv tests from the interface's description: the abstract base a dynamic
HiCache backend derives from, and the config it is built with."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, List, Optional


@dataclass
class HiCacheStorageConfig:
    tp_rank: int = 0
    tp_size: int = 1
    pp_rank: int = 0
    pp_size: int = 1
    is_mla_model: bool = False
    is_page_first_layout: bool = True
    model_name: Optional[str] = None
    extra_config: Optional[dict] = field(default=None)


class HiCacheStorage(abc.ABC):
    @abc.abstractmethod
    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Any: ...

    @abc.abstractmethod
    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Any]: ...

    @abc.abstractmethod
    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool: ...

    @abc.abstractmethod
    def batch_set(self, keys: List[str], values: Optional[Any] = None,
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool: ...

    @abc.abstractmethod
    def exists(self, key: str) -> bool: ...

    def batch_exists(self, keys: List[str], extra_info: Optional[Any] = None) -> int:
        for i, k in enumerate(keys):
            if not self.exists(k):
                return i
        return len(keys)

    def batch_get_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Optional[Any] = None) -> List[bool]:
        raise NotImplementedError

    def batch_set_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Optional[Any] = None) -> List[bool]:
        raise NotImplementedError

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.mem_pool_host = mem_pool_host

    def clear(self) -> None:
        pass

    def get_stats(self) -> Any:
        return None
