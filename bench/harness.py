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


def cpp_client_rate(build: Path, address: str, size: int, count: int) -> dict:
    """{"put_gbps", "get_gbps", "put_p50_us", "get_p50_us"} of one C++ client thread."""
    out = subprocess.run([str(build / "tierkv_bench"), "--client-only", address, "--size",
                          str(size), "--count", str(count)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
