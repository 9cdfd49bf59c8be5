"""Shared pieces of the Python benchmark drivers: import paths and the C++
client's figures (tierkv_bench --client-only) against a running manager."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup(build: Path) -> None:
    """Makes `import tierkv` and the test harness (conftest.Manager) importable."""
    os.environ["TIERKV_BUILD_DIR"] = str(build)
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    sys.path.insert(0, str(build / "python"))


def cpp_client_rate(build: Path, address: str, size: int, count: int, threads: int = 1) -> dict:
    """{"put_gbps", "get_gbps", "put_p50_us", "get_p50_us", "put_p99_us", ...} of
    `threads` C++ client threads (one by default)."""
    cmd = [str(build / "tierkv_bench"), "--client-only", address, "--size", str(size),
           "--count", str(count)]
    if threads != 1:  # builds before --threads take the default only
        cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
