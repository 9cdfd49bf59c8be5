#!/usr/bin/env bash
# Same-run A/B of two builds (manager and C++ client together): 1-thread put
# and get over shared memory of 4 KiB and 1 MiB objects (SIZES, in the
# environment, lists other sizes in bytes, up to 16 MiB).
#
#   bench/ab_client.sh BASE_BUILD_DIR NEW_BUILD_DIR [ROUNDS]
#
# BASE_FLAGS / NEW_FLAGS (environment) add manager flags to one side, so one
# build can be compared with itself under two configurations (for example
# NEW_FLAGS="--etcd-endpoints 127.0.0.1:2379 --addr 127.0.0.1:7700": cluster
# mode, with the store's change journal on).
#
# Each round starts a fresh manager per build, discards one warm-up run, then
# measures one; builds alternate so drift affects both alike. Prints each run
# and then the medians and new/base ratios.
set -euo pipefail
base=$1 new=$2 rounds=${3:-7}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {  # build size count flags
  local sock
  sock=$(mktemp -u /tmp/tierkv-ab-XXXXXX.sock)
  "$1/tierkv-server" --uds-path "$sock" --listen "" --metrics-url http://127.0.0.1:0 \
    --dram-size 2GiB --max-object-bytes 16MiB --log-level error $4 >/dev/null &
  local pid=$!
  for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
  "$1/tierkv_bench" --client-only "unix:$sock" --size "$2" --count "$3" >/dev/null
  "$1/tierkv_bench" --client-only "unix:$sock" --size "$2" --count "$3"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -f "$sock"
}
for round in $(seq "$rounds"); do
  for size in ${SIZES:-4096 1048576}; do
    count=$((size <= 4096 ? 100000 : size <= 65536 ? 20000 : size <= 1048576 ? 900 : 256))
    for which in base new; do
      dir=$([ "$which" = base ] && echo "$base" || echo "$new")
      flags=$([ "$which" = base ] && echo "${BASE_FLAGS:-}" || echo "${NEW_FLAGS:-}")
      echo "$size $which $(run "$dir" "$size" "$count" "$flags")" | tee -a "$log"
    done
  done
done
/usr/bin/python3 - "$log" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    size, which, js = line.split(" ", 2)
    rows.setdefault((size, which), []).append(json.loads(js))
for size in dict.fromkeys(size for size, _ in rows):
    for k in ("put_gbps", "get_gbps", "put_p50_us", "get_p50_us"):
        b = statistics.median(r[k] for r in rows[(size, "base")])
        n = statistics.median(r[k] for r in rows[(size, "new")])
        print(f"{size:>8} {k:<11} base {b:8.4g}  new {n:8.4g}  new/base {n / b:.3f}")
PY
