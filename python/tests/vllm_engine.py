"""A small stand-in of a vLLM engine for the connector tests: vLLM's config
and request objects (only the fields a connector reads), a scheduler and a
worker connector driven in vLLM's order, and a two-layer attention model in
plain torch over a paged KV cache.

The model runs one token at a time, so a token's computation is the same
whether the KV before it was computed here or loaded: logits computed after
a load are torch.equal to logits computed from scratch exactly when the
loaded bytes are the ones the model computes.

Run as a script, it is engine 2 of the two-engine test: a process of its own
with its own block ids that prints JSON (see main()).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import pickle
import sys
import types
from dataclasses import dataclass, field

import os

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "vllm_standin"))

import torch  # noqa: E402

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (  # noqa: E402
    KVConnectorLogging, KVConnectorProm)

VOCAB, LAYERS, HEADS, HEAD, BLOCK = 64, 2, 2, 8, 4


# ------------------------------------------------------------ vLLM's objects

@dataclass
class AttentionSpec:
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: torch.dtype


class MLAAttentionSpec(AttentionSpec):
    pass


def vllm_config(socket: str, *, model: str = "toy/model-a", tenant: str = "vllm",
                role: str = "kv_both", mla: bool = False, tp: int = 1, tag: str = ""):
    ns = types.SimpleNamespace
    extra = {"socket": socket, "tenant": tenant}
    if tag:
        extra["tag"] = tag
    return ns(model_config=ns(model=model, dtype=torch.float32, use_mla=mla),
              cache_config=ns(block_size=BLOCK),
              parallel_config=ns(tensor_parallel_size=tp, pipeline_parallel_size=1),
              kv_transfer_config=ns(kv_connector="TierkvConnector", kv_role=role,
                                    kv_connector_module_path="tierkv.integrations.vllm",
                                    kv_connector_extra_config=extra))


def kv_cache_config(num_blocks: int, mla: bool = False):
    spec_cls = MLAAttentionSpec if mla else AttentionSpec
    spec = spec_cls(BLOCK, 1 if mla else HEADS, HEAD * (2 if mla else 1), torch.float32)
    group = types.SimpleNamespace(layer_names=[f"layers.{i}.attn" for i in range(LAYERS)],
                                  kv_cache_spec=spec)
    return types.SimpleNamespace(num_blocks=num_blocks, kv_cache_groups=[group])


@dataclass
class Request:
    request_id: str
    prompt_token_ids: list[int]
    block_hashes: list[bytes] = field(default_factory=list)
    num_computed_tokens: int = 0

    def __post_init__(self) -> None:
        parent = b""
        for i in range(len(self.prompt_token_ids) // BLOCK):
            parent = hashlib.sha256(
                parent + json.dumps(self.prompt_token_ids[i * BLOCK:(i + 1) * BLOCK]).encode()
            ).digest()
            self.block_hashes.append(parent)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)


class KVCacheBlocks:
    def __init__(self, ids: list[int]):
        self._ids = ids

    def get_block_ids(self) -> tuple[list[int], ...]:
        return (list(self._ids),)


def scheduler_output(new: list[tuple[str, list[int], int, int]] = ()):
    """(req_id, block_ids, num_computed_tokens, num_scheduled_tokens) each."""
    ns = types.SimpleNamespace
    return ns(scheduled_new_reqs=[ns(req_id=r, block_ids=(ids,), num_computed_tokens=c,
                                     prompt_token_ids=None) for r, ids, c, _ in new],
              scheduled_cached_reqs=ns(req_ids=[], new_block_ids=[], num_computed_tokens=[],
                                       resumed_req_ids=set()),
              num_scheduled_tokens={r: n for r, _, _, n in new}, finished_req_ids=set())


# ----------------------------------------------------------------- the model

class Model:
    """Two attention layers; paged KV in the FlashAttention layout
    [2, num_blocks, BLOCK, HEADS, HEAD] per layer (MLA: [num_blocks, BLOCK,
    2 * HEAD], one latent head)."""

    def __init__(self, num_blocks: int, mla: bool = False, seed: int = 7, hnd: bool = False,
                 device: str = "cpu"):
        g = torch.Generator().manual_seed(seed)
        d = HEADS * HEAD
        self.mla, self.device = mla, device
        self.emb = torch.randn(VOCAB, d, generator=g).to(device)
        self.w = [[(torch.randn(d, d, generator=g) / d ** 0.5).to(device) for _ in range(4)]
                  for _ in range(LAYERS)]
        if mla:
            self.kv = {f"layers.{i}.attn": torch.zeros(num_blocks, BLOCK, 2 * HEAD, device=device)
                       for i in range(LAYERS)}
        elif hnd:  # heads before tokens in memory: the same logical shape, other strides
            self.kv = {f"layers.{i}.attn": torch.zeros(2, num_blocks, HEADS, BLOCK, HEAD,
                                                       device=device).transpose(2, 3)
                       for i in range(LAYERS)}
        else:
            self.kv = {f"layers.{i}.attn": torch.zeros(2, num_blocks, BLOCK, HEADS, HEAD,
                                                       device=device)
                       for i in range(LAYERS)}

    def _slot(self, layer: torch.Tensor, block: int, off: int, which: int) -> torch.Tensor:
        if self.mla:
            return layer[block, off, which * HEAD:(which + 1) * HEAD]
        return layer[which, block, off]

    def forward(self, tokens: list[int], start: int, table: list[int]) -> torch.Tensor:
        """Computes positions start.. one at a time (the KV before `start`
        is in the cache); the last position's logits."""
        x = None
        for p in range(start, len(tokens)):
            x = self.emb[tokens[p]]
            for i, (wq, wk, wv, wo) in enumerate(self.w):
                layer = self.kv[f"layers.{i}.attn"]
                heads = 1 if self.mla else HEADS
                q, k, v = (x @ wq), (x @ wk), (x @ wv)
                if self.mla:  # one latent head of HEAD: the first HEAD dims
                    q, k, v = q[:HEAD], k[:HEAD], v[:HEAD]
                self._slot(layer, table[p // BLOCK], p % BLOCK, 0).copy_(
                    k.view_as(self._slot(layer, 0, 0, 0)))
                self._slot(layer, table[p // BLOCK], p % BLOCK, 1).copy_(
                    v.view_as(self._slot(layer, 0, 0, 1)))
                ks = torch.stack([self._slot(layer, table[j // BLOCK], j % BLOCK, 0).reshape(-1)
                                  for j in range(p + 1)])
                vs = torch.stack([self._slot(layer, table[j // BLOCK], j % BLOCK, 1).reshape(-1)
                                  for j in range(p + 1)])
                qh = q.reshape(heads, -1)
                att = torch.softmax(torch.einsum("hd,thd->ht", qh, ks.view(p + 1, heads, -1)), -1)
                out = torch.einsum("ht,thd->hd", att, vs.view(p + 1, heads, -1)).reshape(-1)
                if self.mla:
                    out = torch.cat([out, torch.zeros(HEADS * HEAD - HEAD, device=self.device)])
                x = x + out @ wo
        return x @ self.emb.T


# ---------------------------------------------------------------- the engine

_ENGINE_INDEX = itertools.count()
_PROM: list[KVConnectorProm] = []  # one per process, as vLLM registers its metrics once


def prometheus(cfg, connector_cls) -> KVConnectorProm:
    if not _PROM:
        _PROM.append(KVConnectorProm(cfg, connector_cls, ["model_name", "engine"],
                                     {i: ["toy", str(i)] for i in range(256)}))
    return _PROM[0]


class Engine:
    """One engine: a scheduler connector, one worker connector, the model,
    and blocks handed out from `first_block` on (so two engines use
    different block ids)."""

    def __init__(self, socket: str, *, num_blocks: int = 64, first_block: int = 0,
                 mla: bool = False, hnd: bool = False, device: str = "cpu", **config):
        from tierkv.integrations.vllm import TierkvConnector
        cfg = vllm_config(socket, mla=mla, **config)
        kcc = kv_cache_config(num_blocks, mla)
        self.scheduler = TierkvConnector(cfg, KVConnectorRole.SCHEDULER, kcc)
        self.worker = TierkvConnector(cfg, KVConnectorRole.WORKER, kcc)
        self.index = next(_ENGINE_INDEX)
        self.logging = KVConnectorLogging(TierkvConnector)
        self.prom = prometheus(cfg, TierkvConnector)
        self.model = Model(num_blocks, mla, hnd=hnd, device=device)
        self.worker.register_kv_caches(self.model.kv)
        self.next_block = first_block
        self.num_blocks = num_blocks
        self.n = 0

    def close(self) -> None:
        self.scheduler.shutdown()
        self.worker.shutdown()

    def _step(self, meta, forward=None) -> None:
        """One forward pass as vLLM's model runner brackets it, and the
        scheduler's handling of its output."""
        self.worker.bind_connector_metadata(meta)
        self.worker.start_load_kv(types.SimpleNamespace(attn_metadata=None))
        if forward is not None:
            forward()
        self.worker.wait_for_save()
        self.worker.clear_connector_metadata()
        self.report_stats(self.worker.get_kv_connector_stats())

    def report_stats(self, worker_stats) -> None:
        """vLLM's path of connector stats: the worker's object crosses to
        the scheduler's process (pickled), the scheduler's own are added,
        and the `data` dict goes to the logging and Prometheus pipelines."""
        stats = pickle.loads(pickle.dumps(worker_stats))
        own = self.scheduler.get_kv_connector_stats()
        if own is not None and not own.is_empty():
            stats = own if stats is None else stats.aggregate(own)
        if stats is not None:
            self.logging.observe(stats.data)
            self.prom.observe(stats.data, self.index)

    def counter(self, name: str) -> float:
        """The Prometheus counter vllm:tierkv_<name> of this engine, as a
        scrape would read it."""
        import prometheus_client
        return prometheus_client.REGISTRY[f"vllm:tierkv_{name}"].labels("toy",
                                                                         str(self.index)).value

    def _await(self, req_id: str, which: int, ended: set[str]) -> None:
        """The next step's get_finished, once the worker's queued transfers
        ran (vLLM steps on meanwhile; this engine has nothing else to run)."""
        self.worker._worker.drain()
        done = self.worker.get_finished(ended)[which]
        assert done and req_id in done, f"{req_id} not reported: {done}"

    def run(self, tokens: list[int], after_lookup=None, publishable: int | None = None) -> dict:
        """Runs a prompt; returns its logits, the tokens the connector
        supplied, and the blocks it reported as failed. `after_lookup(req,
        matched)` runs between the scheduler's lookup and the load."""
        self.n += 1
        req = Request(f"req-{self.n}", tokens)
        if publishable is not None:  # recent vLLM: hashes that may be published
            req.num_publishable_block_hashes = publishable
        ext, is_async = self.scheduler.get_num_new_matched_tokens(req, 0)
        assert (ext > 0) == bool(is_async)
        if after_lookup is not None:
            after_lookup(req, ext)
        nblocks = -(-len(tokens) // BLOCK)
        table = [(self.next_block + i) % self.num_blocks for i in range(nblocks)]
        self.next_block += nblocks
        errors: set[int] = set()
        if ext:
            self.scheduler.update_state_after_alloc(req, KVCacheBlocks(table), ext)
            self._step(self.scheduler.build_connector_meta(scheduler_output()))
            self._await(req.request_id, 1, set())
            errors = self.worker.get_block_ids_with_load_errors()
            if errors:  # recomputed from the first failed block
                ext = min(table.index(b) for b in errors) * BLOCK
        req.num_computed_tokens = ext
        meta = self.scheduler.build_connector_meta(
            scheduler_output([(req.request_id, table, ext, len(tokens) - ext)]))
        logits = []
        self._step(meta, lambda: logits.append(self.model.forward(tokens, ext, table)))
        if self.scheduler.request_finished(req, table)[0]:
            self._await(req.request_id, 0, {req.request_id})
        else:
            self.worker.get_finished({req.request_id})
        self._step(self.scheduler.build_connector_meta(scheduler_output()))  # nothing to run
        return {"logits": logits[0], "loaded": ext, "errors": errors}


def scratch_logits(tokens: list[int], mla: bool = False, device: str = "cpu") -> torch.Tensor:
    model = Model(64, mla, device=device)
    return model.forward(tokens, 0, list(range(-(-len(tokens) // BLOCK))))


def main() -> None:
    """engine-2 SOCKET PROMPT_JSON [DEVICE]: runs the prompt with block ids
    of its own; prints {"loaded", "equal", "errors"}."""
    socket, tokens = sys.argv[1], json.loads(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    e = Engine(socket, first_block=40, device=device)
    try:
        got = e.run(tokens)
    finally:
        e.close()
    print(json.dumps({"loaded": got["loaded"], "errors": sorted(got["errors"]),
                      "equal": bool(torch.equal(got["logits"],
                                                scratch_logits(tokens, device=device)))}))


if __name__ == "__main__":
    main()
