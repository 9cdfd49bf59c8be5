"""Fixtures: a real tierkv-server started per test module on private addresses."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import shutil
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TIERKV_BUILD_DIR", ROOT / "build"))
sys.path.insert(0, str(BUILD / "python"))

SERVER_BIN = os.environ.get("TIERKV_SERVER_BIN", str(BUILD / "tierkv-server"))


class Manager:
    """A tierkv-server process on a temp Unix socket and an ephemeral TCP port
    (`server`: another tierkv-server binary than SERVER_BIN)."""

    def __init__(self, *extra: str, socket_path: str | None = None, server: str | None = None):
        self.server = server or SERVER_BIN
        self.dir = tempfile.mkdtemp(prefix="tierkv-py-")
        self.socket_path = socket_path or os.path.join(self.dir, "tierkv.sock")
        self.extra = list(extra)
        self.proc: subprocess.Popen | None = None
        self.uds = ""
        self.tcp = ""
        self.rest = ""
        self.start()

    def start(self) -> None:
        args = [self.server, "--uds-path", self.socket_path, "--listen", "127.0.0.1:0",
                "--log-level", "warn"]
        if "--metrics-url" not in self.extra:
            args += ["--metrics-url", "http://127.0.0.1:0"]
        if "--dram-size" not in self.extra:
            args += ["--dram-size", "128MiB"]
        self.proc = subprocess.Popen(args + self.extra, stdout=subprocess.PIPE, text=True)
        self.uds = self.tcp = self.rest = ""
        deadline = time.time() + 20
        text = ""
        while not (self.uds and self.tcp and self.rest):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"manager did not start: {text}")
            line = self.proc.stdout.readline()
            text += line
            r = re.match(r"rest api on (\S+)", line)
            if r:
                self.rest = r.group(1)
            m = re.match(r"listening on (\S+)", line)
            if m:
                addr = m.group(1)
                if addr.startswith("unix:"):
                    self.uds = addr
                else:
                    self.tcp = addr

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=20)
        self.proc = None
        return rc

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1.

    Chosen below the kernel's ephemeral range when there is room: a port from
    that range, once closed, can be given to any process's outgoing connection
    before the server it was meant for binds it.
    """
    import random
    import socket

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    candidates = [random.randrange(10000, low) for _ in range(100)] if low - 10000 >= 1000 else []
    for port in candidates + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("cannot find a free port")


@pytest.fixture
def scratch():
    """A temp directory removed after the test (pytest's tmp_path keeps the last runs')."""
    path = Path(tempfile.mkdtemp(prefix="tierkv-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def manager():
    m = Manager()
    yield m
    m.close()


@pytest.fixture(params=["uds", "tcp"])
def client(request, manager):
    import tierkv
    # A tenant per test keeps tests independent on the shared manager.
    tenant = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
    c = tierkv.Client(getattr(manager, request.param), tenant)
    yield c
    if not c.closed:
        c.remove_all(force=True)
        c.close()
