"""`pip install ./python` from the checkout: a fresh venv (with the system's
site packages, offline, no build isolation) gets the tierkv package with its
extension and stubs, and it talks to a manager."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from conftest import ROOT, Manager


def test_pip_install_builds_an_importable_package_that_works():
    m = Manager()
    with tempfile.TemporaryDirectory(prefix="tierkv-venv-") as d:
        try:
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                           check=True)
            py = os.path.join(venv, "bin", "python")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PIP_NO_INDEX"] = "1"
            r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation",
                                "--no-deps", str(ROOT / "python")],
                               env=env, capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, r.stdout + r.stderr
            code = (
                "import os, tierkv, tierkv.integrations.sglang as s\n"
                "assert tierkv.__file__.startswith(os.environ['VENV'])\n"
                "here = os.path.dirname(tierkv.__file__)\n"
                "assert os.path.exists(os.path.join(here, '_tierkv.pyi'))\n"
                "assert os.path.exists(os.path.join(here, 'py.typed'))\n"
                f"c = tierkv.Client({m.uds!r})\n"
                "c.put('pip/one', b'installed')\n"
                "assert c.get('pip/one') == b'installed'\n"
                "print('ok')\n")
            run = subprocess.run([py, "-c", code], env=dict(env, VENV=venv), cwd=d,
                                 capture_output=True, text=True, timeout=60)
            assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
        finally:
            m.close()
