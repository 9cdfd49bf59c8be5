#!/usr/bin/env bash
# The installed C++ package: `cmake --install` into a temp prefix, then the
# standalone example project built against it with find_package(tierkv) and,
# separately, with pkg-config; both round-trip an object through a manager.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d /tmp/tierkv-install-XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
test -f "$tmp/prefix/include/tierkv/client.h"
test -f "$tmp/prefix/lib/cmake/tierkv/tierkvConfig.cmake"

cmake -S "$src/examples/cpp_client" -B "$tmp/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$tmp/example" > /dev/null
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --exists tierkv
# shellcheck disable=SC2046
c++ -std=c++20 -O1 -o "$tmp/example_pc" "$src/examples/cpp_client/main.cc" \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs tierkv)

sock="$tmp/tierkv.sock"
"$build/tierkv-server" --uds-path "$sock" --listen "" --metrics-url http://127.0.0.1:0 \
  --dram-size 64MiB --log-level warn > "$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  [ -S "$sock" ] && break
  sleep 0.05
done
test -S "$sock"
"$tmp/example/tierkv_example" "unix:$sock"
"$tmp/example_pc" "unix:$sock"
echo "install test: ok"
