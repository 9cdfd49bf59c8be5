"""The examples run against a real manager and verify their own results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import BUILD, ROOT


def run_example(name: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_paged_kv_offload(manager):
    out = run_example("paged_kv_offload.py", manager.uds)
    assert "offloaded 10 blocks" in out
    assert "loaded 10/10 blocks back; contents verified" in out


def test_multi_worker(manager):
    out = run_example("multi_worker.py", manager.uds, "3")
    assert out.count("verified 50/50") == 3
