"""tierkv as a vLLM KV connector (v1): prefix KV offloaded to and shared
through tierkv. Start vLLM with::

    --kv-transfer-config '{"kv_connector": "TierkvConnector",
        "kv_connector_module_path": "tierkv.integrations.vllm", "kv_role": "kv_both",
        "kv_connector_extra_config": {"socket": "unix:/run/tierkv/tierkv.sock",
                                      "tenant": "vllm"}}'

One object per full block and worker: every layer of the worker's shard, in
layer order, each layer as vLLM's logical block (K then V for the
FlashAttention and FlashInfer layouts, the latent block for MLA). The key is
``<identity>/<block hash>``: the identity digests the model, an operator's
tag, the attention kind, the KV spec (dtype, block size, KV heads, head size)
and the worker's place (tp rank and size unless the cache is MLA and so
rank-replicated, pp rank and size), so deployments that would not produce the
same bytes never read each other's blocks; one tenant may hold several models.

The scheduler half looks up the leading run of a request's full prompt
blocks (never the block holding the last prompt token, which vLLM must
compute) and answers it as an asynchronous load; the worker half moves
blocks on a background thread and reports them through ``get_finished``; a
block that cannot be read is reported through
``get_block_ids_with_load_errors`` and vLLM recomputes it. No method raises
into vLLM's threads after start-up. See docs/vllm.md.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from .. import derive_namespace
from ..errors import TierkvError
from ._hicache import Connections, digest, field
from ._vllm_stats import HAVE_PROM_METRICS, StepCounters, TierkvConnectorStats, TierkvPromMetrics

from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # isort: skip
    KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole)

try:  # vLLM without hybrid-model support has no such mixin
    from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA
except ImportError:  # pragma: no cover - depends on the vLLM installed
    class SupportsHMA:  # type: ignore[no-redef]
        pass

log = logging.getLogger("tierkv.integrations.vllm")

_DEFAULT_SOCKET = "unix:/tmp/tierkv.sock"


@dataclasses.dataclass
class BlockTransfer:
    """Blocks of one request to load into or save from the paged KV: vLLM's
    block ids and their block hashes (hex), in the same order."""
    req_id: str
    block_ids: list[int]
    hashes: list[str]


@dataclasses.dataclass
class TierkvConnectorMetadata(KVConnectorMetadata):
    """What the scheduler half asks the workers to do in one step."""
    loads: list[BlockTransfer] = dataclasses.field(default_factory=list)
    saves: list[BlockTransfer] = dataclasses.field(default_factory=list)


def block_hash_hex(h: Any) -> str:
    """A vLLM block hash as hex: bytes (recent vLLM), an object with a
    ``hash_value`` (older), or an int."""
    h = getattr(h, "hash_value", h)
    if isinstance(h, (bytes, bytearray)):
        return bytes(h).hex()
    if isinstance(h, int):
        return format(h & ((1 << 128) - 1), "x")
    return str(h)


@dataclasses.dataclass
class _Placement:
    tp_rank: int = 0
    tp_size: int = 1
    pp_rank: int = 0
    pp_size: int = 1


def _kv_spec(kv_cache_config: Any) -> Any:
    groups = field(kv_cache_config, "kv_cache_groups", None) or []
    return field(groups[0], "kv_cache_spec", None) if groups else None


def identity_inputs(vllm_config: Any, kv_cache_config: Any, tag: str,
                    where: _Placement | None) -> dict[str, str]:
    """What a worker's blocks depend on; without `where`, the deployment's
    (the connection's storage namespace)."""
    spec = _kv_spec(kv_cache_config)
    model = field(vllm_config, "model_config", None)
    mla = bool(field(model, "use_mla", False)) or type(spec).__name__.startswith("MLA")
    inputs = {
        "engine": "vllm",
        "model": str(field(model, "model", "") or ""),
        "tag": tag,
        "attention": "mla" if mla else "mha",
        "dtype": str(field(spec, "dtype", field(model, "dtype", ""))),
        "block_size": str(field(spec, "block_size", "")),
        "kv_heads": str(field(spec, "num_kv_heads", "")),
        "head_size": str(field(spec, "head_size", "")),
    }
    if where is not None:
        inputs["pp"] = f"{where.pp_rank}/{where.pp_size}"
        if not mla:  # MLA's latent cache is the same on every tp rank
            inputs["tp"] = f"{where.tp_rank}/{where.tp_size}"
    return inputs


def identity(vllm_config: Any, kv_cache_config: Any, tag: str, where: _Placement) -> str:
    """The 32 hex digits every key of one worker starts with."""
    return digest(identity_inputs(vllm_config, kv_cache_config, tag, where))[:32]


@dataclasses.dataclass
class _Request:
    """The scheduler's view of one request it may load or save blocks for."""
    request: Any
    block_ids: list[int] = dataclasses.field(default_factory=list)
    saved_upto: int = 0  # blocks [0, saved_upto) are stored (or were loaded, or were local)
    load_start: int = 0  # blocks vLLM had computed when the load was decided
    load_blocks: int = 0
    saving: bool = False  # a save was asked for: request_finished keeps its blocks


class TierkvConnector(KVConnectorBase_V1, SupportsHMA):

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        tc = vllm_config.kv_transfer_config
        extra = dict(field(tc, "kv_connector_extra_config", None) or {})
        kv_role = str(field(tc, "kv_role", "kv_both") or "kv_both")
        self._load = kv_role in ("kv_both", "kv_consumer")
        self._save = kv_role in ("kv_both", "kv_producer")
        self._block_size = int(field(vllm_config.cache_config, "block_size", 16))
        self._tag = str(extra.get("tag", "") or "")
        self._kv_cache_config = kv_cache_config
        groups = field(kv_cache_config, "kv_cache_groups", None) or []
        self._enabled = len(groups) <= 1
        if not self._enabled:
            log.warning("tierkv: %d KV cache groups (a hybrid model); only single-group models "
                        "are offloaded, this one is always recomputed", len(groups))
        par = vllm_config.parallel_config
        self._tp_size = int(field(par, "tensor_parallel_size", 1) or 1)
        self._pp_size = int(field(par, "pipeline_parallel_size", 1) or 1)
        namespace = derive_namespace(**identity_inputs(vllm_config, kv_cache_config, self._tag,
                                                       None))
        self._counters = StepCounters()
        address = str(extra.get("socket", _DEFAULT_SOCKET))
        tenant = str(extra.get("tenant", "vllm"))
        if role == KVConnectorRole.SCHEDULER:
            self._conns = Connections(address, tenant, 0, namespace, "vllm-scheduler")
            # Every worker's keys: a block is there only when all hold it.
            self._prefixes = sorted({
                identity(vllm_config, kv_cache_config, self._tag, _Placement(t, self._tp_size,
                                                                             p, self._pp_size))
                for t in range(self._tp_size) for p in range(self._pp_size)})
            self._requests: dict[str, _Request] = {}
            self._loads: list[BlockTransfer] = []
        else:
            from ._vllm_worker import Worker
            where = _Placement(*_worker_ranks(self._tp_size, self._pp_size))
            prefix = identity(vllm_config, kv_cache_config, self._tag, where)
            self._worker = Worker(Connections(address, tenant, where.tp_rank, namespace,
                                              "vllm-worker"), prefix, self._counters)

    # ------------------------------------------------------------ scheduler

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int
                                   ) -> tuple[int | None, bool]:
        state = self._requests.setdefault(request.request_id, _Request(request))
        start = num_computed_tokens // self._block_size
        state.saved_upto = max(state.saved_upto, start)
        if not (self._enabled and self._load):
            return 0, False
        prompt = int(field(request, "num_prompt_tokens", 0) or len(request.prompt_token_ids))
        # The block holding the last prompt token is always computed.
        usable = min((prompt - 1) // self._block_size, len(request.block_hashes))
        if usable <= start:
            return 0, False
        hashes = [block_hash_hex(h) for h in request.block_hashes[start:usable]]
        found = self._lookup(hashes)
        if found == 0:
            return 0, False
        state.load_start, state.load_blocks = start, found
        return found * self._block_size, True

    def _lookup(self, hashes: list[str]) -> int:
        """How many of `hashes`, from the first, every worker's objects hold."""
        c = self._conns.get()
        held = None
        if c is not None:
            keys = [f"{p}/{h}" for h in hashes for p in self._prefixes]
            try:
                held = c.batch_exists(keys)
            except (TierkvError, OSError) as e:
                log.warning("tierkv: lookup failed (%s); the blocks are recomputed", e)
                self._conns.drop()
        if held is None:
            self._counters.add(lookups=1, lookup_blocks=len(hashes), lookup_failures=1)
            return 0
        n = len(self._prefixes)
        found = next((i for i in range(len(hashes)) if not all(held[i * n:(i + 1) * n])),
                     len(hashes))
        self._counters.add(lookups=1, lookup_blocks=len(hashes), hit_blocks=found)
        return found

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int):
        state = self._requests.setdefault(request.request_id, _Request(request))
        if num_external_tokens <= 0 or state.load_blocks == 0:
            return
        ids = list(blocks.get_block_ids()[0])
        n = num_external_tokens // self._block_size
        first = state.load_start
        hashes = [block_hash_hex(h) for h in request.block_hashes[first:first + n]]
        self._loads.append(BlockTransfer(request.request_id, ids[first:first + n], hashes))
        state.saved_upto = max(state.saved_upto, first + n)  # they are stored already
        state.load_blocks = 0

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        meta = TierkvConnectorMetadata(loads=self._loads)
        self._loads = []
        scheduled = field(scheduler_output, "num_scheduled_tokens", {}) or {}
        touched: list[tuple[_Request, int]] = []
        for new in field(scheduler_output, "scheduled_new_reqs", []) or []:
            state = self._requests.get(new.req_id)
            if state is None:
                continue
            state.block_ids = list(new.block_ids[0])
            touched.append((state, new.num_computed_tokens + scheduled.get(new.req_id, 0)))
        cached = field(scheduler_output, "scheduled_cached_reqs", None)
        resumed = set(field(cached, "resumed_req_ids", None) or ())
        for i, req_id in enumerate(field(cached, "req_ids", []) or []):
            state = self._requests.get(req_id)
            if state is None:
                continue
            new_ids = cached.new_block_ids[i]
            if req_id in resumed or _resumed_flag(cached, i):
                state.block_ids = list(new_ids[0]) if new_ids else []
            elif new_ids:
                state.block_ids.extend(new_ids[0])
            touched.append((state, cached.num_computed_tokens[i] + scheduled.get(req_id, 0)))
        if self._enabled and self._save:
            for state, computed in touched:
                self._save_full_blocks(meta, state, computed)
        return meta

    def _save_full_blocks(self, meta: TierkvConnectorMetadata, state: _Request,
                          computed: int) -> None:
        """Adds to `meta` the blocks of `state` that are full once `computed`
        tokens are and that were not stored yet."""
        hashes = state.request.block_hashes
        # Recent vLLM says how many of the hashes name blocks that may be
        # published under them (speculative decoding can hold the tail back).
        publishable = field(state.request, "num_publishable_block_hashes", None)
        limit = len(hashes) if publishable is None else min(int(publishable), len(hashes))
        full = min(computed // self._block_size, limit, len(state.block_ids))
        if full <= state.saved_upto:
            return
        span = range(state.saved_upto, full)
        meta.saves.append(BlockTransfer(state.request.request_id,
                                        [state.block_ids[i] for i in span],
                                        [block_hash_hex(hashes[i]) for i in span]))
        state.saved_upto = full
        state.saving = True

    def request_finished(self, request: Any, block_ids: Any) -> tuple[bool, dict | None]:
        """Keeps the blocks while a save of them may still run on a worker
        (the workers report the request through get_finished)."""
        state = self._requests.pop(request.request_id, None)
        return (state is not None and state.saving), None

    def request_finished_all_groups(self, request: Any, block_ids: Any
                                    ) -> tuple[bool, dict | None]:
        return self.request_finished(request, block_ids)

    # --------------------------------------------------------------- worker

    def register_kv_caches(self, kv_caches: dict[str, Any]) -> None:
        self._worker.register(kv_caches)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        for t in getattr(meta, "loads", ()):
            self._worker.submit("load", t)

    def wait_for_layer_load(self, layer_name: str) -> None:
        # Loads finish between steps: vLLM schedules a request only once
        # get_finished reported its load.
        return None

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        return None  # whole blocks are saved after the forward pass (wait_for_save)

    def wait_for_save(self) -> None:
        meta = self._get_connector_metadata()
        for t in getattr(meta, "saves", ()):
            self._worker.submit("save", t)

    def handle_preemptions(self, kv_connector_metadata: Any) -> None:
        # A preempted request's blocks are reused at once: its saves finish first.
        self._worker.drain()

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None,
                                                                set[str] | None]:
        return self._worker.finished(finished_req_ids)

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self._worker.take_load_errors()

    # ---------------------------------------------------------------- stats

    def get_kv_connector_stats(self) -> TierkvConnectorStats | None:
        """This half's counters since the last call (None when nothing
        happened). Scheduler: lookups; worker: loads and saves."""
        return self._counters.take()

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None
                                 ) -> TierkvConnectorStats:
        return TierkvConnectorStats(data=dict(data) if isinstance(data, dict) else {})

    @classmethod
    def build_prom_metrics(cls, vllm_config: Any, metric_types: dict, labelnames: list[str],
                           per_engine_labelvalues: dict[int, list[object]]
                           ) -> TierkvPromMetrics | None:
        if not HAVE_PROM_METRICS:
            return None
        return TierkvPromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    def shutdown(self) -> None:
        worker = getattr(self, "_worker", None)
        if worker is not None:
            worker.close()
        conns = getattr(self, "_conns", None)
        if conns is not None:
            conns.close_all()


def _resumed_flag(cached: Any, i: int) -> bool:
    flags = field(cached, "resumed_from_preemption", None)
    return bool(flags[i]) if flags else False


def _worker_ranks(tp_size: int, pp_size: int) -> tuple[int, int, int, int]:
    """(tp rank, tp size, pp rank, pp size) of this worker process."""
    tp_rank = pp_rank = 0
    try:
        from vllm.distributed import parallel_state as ps
        tp_rank = int(ps.get_tensor_model_parallel_rank())
        pp_rank = int(ps.get_pp_group().rank_in_group) if pp_size > 1 else 0
    except (ImportError, AttributeError, AssertionError) as e:
        if tp_size > 1 or pp_size > 1:
            raise RuntimeError(f"tierkv: cannot tell this worker's rank ({e})") from e
    return tp_rank, tp_size, pp_rank, pp_size
