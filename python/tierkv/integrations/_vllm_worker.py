"""The worker half of the vLLM connector: vLLM's paged KV tensors, and the
background thread that moves whole blocks between them and tierkv.

A block's object is every layer's logical block, in registration order:
FlashAttention ``[2, num_blocks, block_size, heads, head_size]`` gives K then
V of the block; FlashInfer ``[num_blocks, 2, ...]`` and MLA ``[num_blocks,
block_size, dim]`` give the block itself. Where those views are contiguous
host memory the client reads and writes them in place (one round trip per
batch); otherwise (CUDA tensors, a head-major physical layout) the bytes go
through a staging buffer with torch copies, on a CUDA stream of the thread's
own when there is one: pinned host memory for CUDA; for host tensors, memory
registered with the manager (``register_buffer``) for loads, so that the
manager writes the blocks there itself (a remote block is read by the data
channel straight into it, with no copy kept on the manager), and plain host
memory when the manager takes no registration.

Thread-safety: submit, drain, finished, take_load_errors and close may be
called from any thread; every transfer runs on the worker's one thread, and
no exception leaves it (a failure is logged and reported).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

import torch

from ..errors import TierkvError
from ._hicache import Connections
from ._vllm_stats import StepCounters

log = logging.getLogger("tierkv.integrations.vllm")


def _block_views(kv: torch.Tensor, layout: str, block: int) -> list[torch.Tensor]:
    if layout == "flash_attn":
        return [kv[0, block], kv[1, block]]
    return [kv[block]]


class _Layer:
    """One layer's tensor and, when its blocks are contiguous host memory,
    the arithmetic of their addresses (no tensor view made per block)."""

    def __init__(self, kv: torch.Tensor, layout: str):
        self.kv, self.layout = kv, layout
        first = _block_views(kv, layout, 0)
        self.in_place = kv.device.type == "cpu" and all(v.is_contiguous() for v in first)
        size = kv.element_size()
        self.part_bytes = first[0].numel() * size
        if layout == "flash_attn":
            self.offsets = [0, kv.stride(0) * size]
            self.block_stride = kv.stride(1) * size
        else:
            self.offsets = [0]
            self.block_stride = kv.stride(0) * size
        self.base = kv.data_ptr()


def detect_layout(kv: torch.Tensor, num_blocks: int | None) -> str:
    """vLLM's layout of one layer's KV tensor; ValueError for any other."""
    if kv.dim() == 5 and kv.shape[0] == 2 and (num_blocks is None or kv.shape[1] == num_blocks):
        return "flash_attn"
    if kv.dim() == 5 and kv.shape[1] == 2:
        return "flash_infer"
    if kv.dim() == 3:
        return "mla"
    raise ValueError(f"tierkv: a KV cache tensor of shape {tuple(kv.shape)} is none of the "
                     "FlashAttention, FlashInfer or MLA layouts")


class Worker:
    def __init__(self, conns: Connections, prefix: str, counters: StepCounters):
        self._conns, self._prefix, self._counters = conns, prefix, counters
        self._layers: list[_Layer] = []
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending: dict[str, int] = {}  # saves queued or running, per request
        self._saved: set[str] = set()  # requests that had saves
        self._ended: set[str] = set()  # requests vLLM said finished
        self._loaded: set[str] = set()  # loads done since the last get_finished
        self._load_errors: set[int] = set()
        self._in_place = False
        self._stream = None
        self._registered: tuple[Any, Any] | None = None  # (client, its RegisteredBuffer)
        self._thread = threading.Thread(target=self._run, name="tierkv-vllm", daemon=True)
        self._thread.start()

    def register(self, kv_caches: dict[str, torch.Tensor]) -> None:
        """The paged KV tensors, once, in layer order. ValueError for a
        layout none of vLLM's."""
        first = next(iter(kv_caches.values()), None)
        num_blocks = None
        if first is not None and first.dim() == 5 and first.shape[0] == 2:
            num_blocks = first.shape[1]
        self._layers = [_Layer(kv, detect_layout(kv, num_blocks)) for kv in kv_caches.values()]
        self._in_place = bool(self._layers) and all(layer.in_place for layer in self._layers)
        if self._in_place:
            # A block's regions, in object order: region r of block b is at
            # bases[r] + b * strides[r] (a block's addresses in one tensor op).
            self._bases = torch.tensor([layer.base + off for layer in self._layers
                                        for off in layer.offsets], dtype=torch.int64)
            self._strides = torch.tensor([layer.block_stride for layer in self._layers
                                          for _ in layer.offsets], dtype=torch.int64)
            self._region_lens = [layer.part_bytes for layer in self._layers
                                 for _ in layer.offsets]
        if first is not None and first.is_cuda:
            self._stream = torch.cuda.Stream(device=first.device)

    # ------------------------------------------------------------ requests

    def submit(self, kind: str, transfer: Any) -> None:
        if not transfer.block_ids:
            return
        with self._lock:
            if kind == "save":
                self._pending[transfer.req_id] = self._pending.get(transfer.req_id, 0) + 1
                self._saved.add(transfer.req_id)
        self._jobs.put((kind, transfer))

    def drain(self) -> None:
        """Waits until every queued transfer has run."""
        with self._idle:
            self._idle.wait_for(lambda: self._jobs.unfinished_tasks == 0)

    def finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        with self._lock:
            self._ended |= set(finished_req_ids)
            sending = {r for r in self._ended if r in self._saved and not self._pending.get(r)}
            self._saved -= sending
            self._ended = {r for r in self._ended if r in self._saved}
            recving, self._loaded = self._loaded, set()
        return sending or None, recving or None

    def take_load_errors(self) -> set[int]:
        with self._lock:
            errors, self._load_errors = self._load_errors, set()
        return errors

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)
        self._conns.close_all()

    # ------------------------------------------------------------- thread

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                kind, t = job
                began = time.monotonic()
                try:
                    ok = self._transfer(kind, t)
                except Exception as e:  # never into vLLM: the blocks count as failed
                    log.exception("tierkv: %s of %d blocks failed: %s", kind, len(t.block_ids), e)
                    self._conns.drop()
                    ok = [False] * len(t.block_ids)
                self._count(kind, ok, time.monotonic() - began)
                self._done(kind, t, ok)
            finally:
                with self._idle:
                    self._jobs.task_done()
                    self._idle.notify_all()

    def _count(self, kind: str, ok: list[bool], seconds: float) -> None:
        good = sum(ok)
        block_bytes = sum(layer.part_bytes * len(layer.offsets) for layer in self._layers)
        self._counters.add(**{f"{kind}_blocks": good, f"{kind}_bytes": good * block_bytes,
                              f"{kind}_seconds": seconds,
                              f"{kind}_failed_blocks": len(ok) - good})

    def _done(self, kind: str, t: Any, ok: list[bool]) -> None:
        with self._lock:
            if kind == "save":
                self._pending[t.req_id] -= 1
                if self._pending[t.req_id] == 0:
                    del self._pending[t.req_id]
                return
            # vLLM recomputes from the first block it cannot use.
            bad = next((i for i, good in enumerate(ok) if not good), None)
            if bad is not None:
                self._load_errors.update(t.block_ids[bad:])
            self._loaded.add(t.req_id)

    def _transfer(self, kind: str, t: Any) -> list[bool]:
        client = self._conns.get()
        if client is None:
            return [False] * len(t.block_ids)
        keys = [f"{self._prefix}/{h}" for h in t.hashes]
        try:
            if self._in_place:
                blocks = torch.tensor(t.block_ids, dtype=torch.int64)
                addrs = (blocks[:, None] * self._strides + self._bases).flatten().tolist()
                return self._call(client, kind, keys, addrs, self._region_lens * len(t.block_ids))
            views = [v for b in t.block_ids for layer in self._layers
                     for v in _block_views(layer.kv, layer.layout, b)]
            return self._staged(client, kind, keys, views, len(views) // len(t.block_ids))
        except (TierkvError, OSError) as e:
            log.warning("tierkv: %s of %d blocks failed (%s)", kind, len(keys), e)
            self._conns.drop()
            return [False] * len(keys)

    @staticmethod
    def _call(client: Any, kind: str, keys: list[str], addrs: list[int],
              lens: list[int]) -> list[bool]:
        if kind == "save":
            st = client.batch_put_regions(keys, addrs, lens)
            return [s.ok or s.name == "DUPLICATED" for s in st]
        return [s.ok for s in client.batch_get_regions(keys, addrs, lens)]

    def _staged(self, client: Any, kind: str, keys: list[str], views: list[torch.Tensor],
                per_block: int) -> list[bool]:
        """The transfer through one host buffer: views copied in before a
        save, copied out of it after a load (only the blocks that arrived)."""
        lens = [v.numel() * v.element_size() for v in views]
        cuda = any(v.is_cuda for v in views)
        registered = None if cuda or kind == "save" else self._registered_staging(client, sum(lens))
        if registered is not None:
            staging = torch.frombuffer(registered, dtype=torch.uint8, count=sum(lens))
        else:
            staging = torch.empty(sum(lens), dtype=torch.uint8, pin_memory=cuda)
        parts, at = [], 0
        for v, n in zip(views, lens):
            parts.append(staging[at:at + n])
            at += n
        addrs = [p.data_ptr() for p in parts]
        stream = torch.cuda.stream(self._stream) if self._stream is not None else _NoStream()
        if kind == "save":
            with stream:
                for p, v in zip(parts, views):
                    p.copy_(v.contiguous().view(-1).view(torch.uint8))
            if self._stream is not None:
                self._stream.synchronize()
            return self._call(client, kind, keys, addrs, lens)
        ok = self._call(client, kind, keys, addrs, lens)
        with stream:
            for b, good in enumerate(ok):
                if not good:
                    continue
                for i in range(b * per_block, (b + 1) * per_block):
                    v = views[i]
                    v.copy_(parts[i].view(v.dtype).view(v.shape), non_blocking=True)
        if self._stream is not None:
            self._stream.synchronize()
        return ok


    # Registered staging grows to the largest load, up to this.
    _MAX_REGISTERED = 1 << 30

    def _registered_staging(self, client: Any, nbytes: int) -> Any:
        """Memory of ``client`` registered with its manager, at least
        ``nbytes``, for a load's staging; None when it cannot have any (TCP,
        the manager takes none or refuses more, a load over the cap)."""
        held = self._registered
        if held is not None and held[0] is client and held[1].size >= nbytes:
            return held[1]
        self._registered = None
        if held is not None and held[0] is client:
            try:
                client.unregister_buffer(held[1])
            except TierkvError:
                pass
        if nbytes > self._MAX_REGISTERED or not getattr(client, "shared_memory", False):
            return None
        size = 1 << max(20, (nbytes - 1).bit_length())
        try:
            buf = client.register_buffer(min(size, self._MAX_REGISTERED))
        except TierkvError as e:
            log.debug("tierkv: no registered staging (%s); plain host memory", e)
            return None
        self._registered = (client, buf)
        return buf


class _NoStream:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
