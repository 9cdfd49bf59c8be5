"""A stand-in for SGLang's storage backend factory, its ``dynamic`` path only:
import ``module_path``, take ``class_name``, insist that it derives from
HiCacheStorage, build it as ``cls(storage_config, kwargs)``."""

from __future__ import annotations

import importlib
from typing import Any

from sglang.srt.mem_cache.hicache_storage import HiCacheStorage


class StorageBackendFactory:
    @staticmethod
    def _load_backend_class(module_path: str, class_name: str, backend_name: str) -> type:
        cls = getattr(importlib.import_module(module_path), class_name)
        if not issubclass(cls, HiCacheStorage):
            raise TypeError(f"{cls} is not a subclass of HiCacheStorage")
        return cls

    @classmethod
    def create_backend(cls, backend_name: str, storage_config: Any, mem_pool_host: Any,
                       **kwargs: Any) -> HiCacheStorage:
        if backend_name != "dynamic" or storage_config.extra_config is None:
            raise ValueError(f"Unknown storage backend '{backend_name}'")
        extra = storage_config.extra_config
        for name in ("backend_name", "module_path", "class_name"):
            if name not in extra:
                raise ValueError(f"Missing required field '{name}' for the dynamic backend")
        backend_class = cls._load_backend_class(extra["module_path"], extra["class_name"],
                                                extra["backend_name"])
        return backend_class(storage_config, kwargs)
