#!/usr/bin/env python3
"""GB/s of device puts and gets through a manager's HBM tier against the
driver's own copy of the same bytes, same run (scripts/gpu-check.sh; needs a
CUDA GPU). For each size, the value is a CUDA tensor; a round puts N values
from it (GPU to GPU into the manager's pool) and gets them back into another
CUDA tensor (GPU to GPU out of it), then the same bytes are copied with
torch (cudaMemcpy): device to device, and device to a pinned host buffer (the
path of a manager without HBM). Reported: GB/s of each and the ratios
put / D2D copy and get / D2D copy (medians over the rounds).

With --device host the same runs on a host without a GPU: the manager's
stand-in devices (--hbm-backend host), the client's (device_copies="host"),
CPU tensors passed as (address, length), and memcpy (torch's copy_) as
every baseline: what the protocol and the pools cost beside a plain copy.

    python3 bench/hbm_bench.py --build BUILD [--rounds 5] [--device cuda|host]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import harness

SIZES = (1 << 20, 16 << 20)
COUNT = 32  # values per round


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(harness.ROOT / "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", choices=("cuda", "host"), default="cuda")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    harness.setup(Path(args.build))
    import torch
    import tierkv
    from conftest import Manager

    assert not cuda or torch.cuda.is_available(), "no CUDA device"
    backend = [] if cuda else ["--hbm-backend", "host"]
    m = Manager("--hbm-devices", "0", "--hbm-size", "2GiB", "--dram-size", "2GiB", *backend)

    def region(t):  # what the device calls take
        return t if cuda else (t.data_ptr(), t.numel())

    def sync():
        if cuda:
            torch.cuda.synchronize()

    try:
        hbm = tierkv.Client(m.uds, "bench", device_copies=args.device)
        for size in SIZES:
            src = torch.randint(0, 255, (COUNT, size), dtype=torch.uint8,
                                device="cuda" if cuda else "cpu")
            dst = torch.empty_like(src)
            pinned = torch.empty((COUNT, size), dtype=torch.uint8, pin_memory=cuda)
            rows = {k: [] for k in ("put", "get", "d2d", "d2h", "h2d")}
            for r in range(args.rounds):
                keys = [f"{size}/{r}/{i}" for i in range(COUNT)]
                sync()
                t = time.perf_counter()
                st = hbm.batch_put_from_device(keys, [region(src[i]) for i in range(COUNT)])
                rows["put"].append(time.perf_counter() - t)
                assert all(st), st
                t = time.perf_counter()
                st = hbm.batch_get_into_device(keys, [region(dst[i]) for i in range(COUNT)])
                rows["get"].append(time.perf_counter() - t)
                assert all(st), st
                assert torch.equal(src, dst)
                hbm.batch_remove(keys)
                for name, fn in (("d2d", lambda: dst.copy_(src)), ("d2h", lambda: pinned.copy_(src)),
                                 ("h2d", lambda: dst.copy_(pinned))):
                    sync()
                    t = time.perf_counter()
                    fn()
                    sync()
                    rows[name].append(time.perf_counter() - t)
            gbps = {k: COUNT * size / statistics.median(v) / 1e9 for k, v in rows.items()}
            print(f"{size >> 20} MiB x{COUNT}: " +
                  " ".join(f"{k} {v:.1f} GB/s" for k, v in gbps.items()) +
                  f" | put/d2d {gbps['put'] / gbps['d2d']:.2f}"
                  f" get/d2d {gbps['get'] / gbps['d2d']:.2f}"
                  f" put/d2h {gbps['put'] / gbps['d2h']:.2f}")
        hbm.close()
        import requests
        metrics = requests.get(m.rest + "/metrics", timeout=5).text
        puts = [line for line in metrics.splitlines()
                if line.startswith("tierkv_hbm_device_puts_total ")]
        want = args.rounds * COUNT * len(SIZES)
        assert puts == [f"tierkv_hbm_device_puts_total {want}"], (puts, want)  # all into HBM
    finally:
        m.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
