#!/usr/bin/env bash
# A local cluster on loopback: one etcd and three managers, each with its own
# ports and directory under a temporary folder. Prints every address; Ctrl-C
# stops them all (managers first, gracefully, then etcd) and removes the folder.
#
#   scripts/run-cluster.sh [BUILD_DIR]      (make run-cluster)
set -euo pipefail
build=${1:-build}
server="$build/tierkv-server"
[ -x "$server" ] || { echo "run-cluster: $server is missing (make build)" >&2; exit 2; }
command -v etcd >/dev/null || { echo "run-cluster: etcd is missing (scripts/deps.sh)" >&2; exit 2; }
dir=$(mktemp -d /tmp/tierkv-cluster-XXXXXX)
pids=()
stop() {
  trap - INT TERM EXIT
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
  echo "run-cluster: stopped"
}
trap stop INT TERM EXIT

etcd --name local --data-dir "$dir/etcd" --unsafe-no-fsync \
  --listen-client-urls http://127.0.0.1:2479 --advertise-client-urls http://127.0.0.1:2479 \
  --listen-peer-urls http://127.0.0.1:2480 --initial-advertise-peer-urls http://127.0.0.1:2480 \
  --initial-cluster local=http://127.0.0.1:2480 --log-level error >"$dir/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:2479/health >/dev/null 2>&1 && break
  sleep 0.1
done
echo "etcd on http://127.0.0.1:2479 (log $dir/etcd.log)"

for n in 1 2 3; do
  mkdir -p "$dir/m$n"
  "$server" --node-id "node-$n" --cluster-name local --etcd-endpoints 127.0.0.1:2479 \
    --addr "127.0.0.1:810$((n + 4))" --data-addr "127.0.0.1:812$n" \
    --uds-path "$dir/m$n/tierkv.sock" --listen "127.0.0.1:760$n" \
    --metrics-url "http://127.0.0.1:810$n" --dram-size 256MiB --data-dir "$dir/m$n" \
    --membership-ttl-secs 10 >"$dir/m$n/out.log" 2>&1 &
  pids+=($!)
done
for n in 1 2 3; do
  for _ in $(seq 100); do grep -q "^peer api on" "$dir/m$n/out.log" 2>/dev/null && break; sleep 0.1; done
  echo "node-$n: rest http://127.0.0.1:810$n, socket unix:$dir/m$n/tierkv.sock," \
    "tcp tcp://127.0.0.1:760$n, peer 127.0.0.1:810$((n + 4)) (log $dir/m$n/out.log)"
done
echo "Ctrl-C stops the cluster"
wait
