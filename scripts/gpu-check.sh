#!/usr/bin/env bash
# The checks that need a GPU (docs/gpu-check.md). They are not part of
# `make test`; they run on a GPU host that has CUDA, PyTorch and its own
# Python but none of our Debian libraries.
#
#   scripts/gpu-check.sh prepare [BUNDLE]
#       On a Debian 12 development host: builds tierkv (make build) and
#       writes BUNDLE (default .gpu/, git-ignored): the manager binary with
#       the shared libraries it needs, and OpenSSL's headers and libcrypto
#       for the client build. Carry BUNDLE to the GPU host with the tree.
#   scripts/gpu-check.sh [run] [BUNDLE]
#       On the GPU host, from the repository root: builds the client and the
#       Python module for that host's python3 (TIERKV_CLIENT_ONLY), starts
#       managers from BUNDLE, runs python/gpu_tests, the connector's
#       benchmark on CUDA tensors and the HBM tier's (bench/hbm_bench.py). Results go to $OUT when it is set.
#       Fails (non-zero) if there is no CUDA device. Takes about 2 minutes.
#   scripts/gpu-check.sh selftest BUILD_DIR [BUNDLE]
#       Without a GPU (ctest gpu_check_bundle): bundles BUILD_DIR's manager,
#       builds the client-only module with the bundled OpenSSL and puts and
#       gets through the bundled manager: everything of `run` but CUDA.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-run}
PY=${PYTHON:-python3}  # the Python the module is built for and the checks run with

# glibc's own libraries: the GPU host's are newer, and used.
SYSTEM_LIBS='^(linux-vdso|libc|libm|libdl|librt|libpthread|ld-linux-x86-64)\.so'

bundle() {  # bundle SERVER_BINARY BUNDLE
  local server=$1 out=$2 lib
  rm -rf "$out"
  mkdir -p "$out/bin" "$out/lib" "$out/crypto" "$out/openssl"
  cp "$server" "$out/bin/tierkv-server.bin"
  for lib in $(ldd "$server" | awk '$3 ~ /^\// {print $3}'); do
    if ! basename "$lib" | grep -Eq "$SYSTEM_LIBS"; then
      cp -L "$lib" "$out/lib/"
    fi
  done
  cat >"$out/bin/tierkv-server" <<'EOF'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib" exec "$here/tierkv-server.bin" "$@"
EOF
  chmod +x "$out/bin/tierkv-server"
  # The client needs libcrypto only; kept apart from lib/ so the Python
  # process never loads the bundle's libstdc++.
  cp -L "$(ldd "$server" | awk '$1 ~ /^libcrypto/ {print $3}')" "$out/crypto/"
  cp -r /usr/include/openssl "$out/openssl/"
  cp /usr/include/x86_64-linux-gnu/openssl/*.h "$out/openssl/openssl/"
}

build_client() {  # build_client BUNDLE BUILD_DIR: the module for this host's python3
  local in=$1 dir=$2 py pybind
  py=$(command -v "$PY")
  pybind=$("$py" -m pybind11 --cmakedir 2>/dev/null || echo /usr/lib/cmake/pybind11)
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIERKV_CLIENT_ONLY=ON \
    -DPython3_EXECUTABLE="$py" -Dpybind11_DIR="$pybind" \
    -DOPENSSL_INCLUDE_DIR="$in/openssl" \
    -DOPENSSL_CRYPTO_LIBRARY="$(ls "$in"/crypto/libcrypto.so.*)" >/dev/null
  cmake --build "$dir" -j "$(nproc)" >/dev/null
}

case "$MODE" in
prepare)
  OUTDIR=${2:-$ROOT/.gpu}
  make -C "$ROOT" build
  bundle "$ROOT/build/tierkv-server" "$OUTDIR"
  du -sh "$OUTDIR"
  ;;
selftest)
  BUILD=${2:?usage: gpu-check.sh selftest BUILD_DIR [BUNDLE]}
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  OUTDIR=${3:-$TMP/bundle}
  bundle "$BUILD/tierkv-server" "$OUTDIR"
  build_client "$OUTDIR" "$TMP/client"
  # Only the client side was built: no manager, no test binaries.
  test ! -e "$TMP/client/tierkv-server"
  TIERKV_BUILD_DIR="$TMP/client" TIERKV_SERVER_BIN="$OUTDIR/bin/tierkv-server" \
    TIERKV_ROOT="$ROOT" PYTHONDONTWRITEBYTECODE=1 "$PY" - <<'EOF'
import sys, os
sys.path.insert(0, os.path.join(os.environ["TIERKV_ROOT"], "python", "tests"))
from conftest import Manager
import tierkv
assert tierkv.__file__.startswith(os.environ["TIERKV_BUILD_DIR"]), tierkv.__file__
m = Manager()
try:
    c = tierkv.Client(m.uds, "selftest")
    c.put("k", b"bundled manager")
    assert c.get("k") == b"bundled manager"
    c.close()
finally:
    m.close()
print("bundle selftest: ok")
EOF
  ;;
run)
  OUTDIR=${2:-$ROOT/.gpu}
  test -x "$OUTDIR/bin/tierkv-server" ||
    { echo "no bundle at $OUTDIR: run 'scripts/gpu-check.sh prepare' on the development host" >&2; exit 2; }
  RESULTS=${OUT:-$(mktemp -d)}
  nvidia-smi -L || true
  "$PY" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"; print("torch", torch.__version__, torch.cuda.get_device_name())'
  CLIENT=$(mktemp -d)
  build_client "$OUTDIR" "$CLIENT"
  export TIERKV_BUILD_DIR=$CLIENT TIERKV_SERVER_BIN=$OUTDIR/bin/tierkv-server PYTHONDONTWRITEBYTECODE=1
  status=0
  "$PY" -m pytest -q -p no:cacheprovider "$ROOT/python/gpu_tests" 2>&1 |
    tee "$RESULTS/gpu-tests.log" || status=1
  "$PY" "$ROOT/bench/vllm_bench.py" --build "$CLIENT" --device cuda --rounds 10 2>&1 |
    tee "$RESULTS/vllm-bench-cuda.log" || status=1
  "$PY" "$ROOT/bench/hbm_bench.py" --build "$CLIENT" --rounds 5 2>&1 |
    tee "$RESULTS/hbm-bench.log" || status=1
  exit $status
  ;;
*)
  echo "usage: gpu-check.sh [prepare [BUNDLE] | run [BUNDLE] | selftest BUILD_DIR [BUNDLE]]" >&2
  exit 2
  ;;
esac
