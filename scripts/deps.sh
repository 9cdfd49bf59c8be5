#!/usr/bin/env bash
# Installs the Debian 12 packages tierkv needs to build, test and benchmark.
# Idempotent: apt-get runs only when something is missing.
set -euo pipefail

PACKAGES=(
  g++ clang cmake ninja-build ccache pkg-config make clang-format
  libspdlog-dev libfmt-dev libcli11-dev libxxhash-dev
  libgtest-dev libgmock-dev libhiredis-dev
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev python3-zmq python3-msgpack
  liburing-dev libcpp-httplib-dev nlohmann-json3-dev libssl-dev python3-requests prometheus wrk openssl
  redis-server redis-tools memcached e2fsprogs
  python3 python3-dev pybind11-dev python3-pytest python3-numpy python3-torch
  python3-pip python3-venv python3-setuptools python3-wheel systemd
  libasio-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler etcd-server etcd-client
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
