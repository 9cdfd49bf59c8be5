#!/usr/bin/env bash
# deploy/tierkv.service: systemd-analyze verify accepts it (against a stand-in
# of the binary it names), and every option its ExecStart passes is one the
# server accepts (checked with --help). systemd-analyze is required.
#   systemd_unit_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
unit="$src/deploy/tierkv.service"
command -v systemd-analyze > /dev/null || { echo "systemd-analyze is missing (scripts/deps.sh)"; exit 1; }
tmp=$(mktemp -d /tmp/tierkv-unit-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The unit names /usr/local/bin/tierkv-server; verify a copy that names the build's.
sed "s|/usr/local/bin/tierkv-server|$build/tierkv-server|" "$unit" > "$tmp/tierkv.service"
if ! out=$(systemd-analyze verify "$tmp/tierkv.service" 2>&1); then
  echo "systemd-analyze verify refused the unit: $out"
  exit 1
fi
help=$("$build/tierkv-server" --help)
for flag in $(sed -n '/^ExecStart=/,/^[A-Z#]/p' "$unit" | grep -o -- '--[a-z-]*'); do
  grep -q -- "$flag" <<< "$help" || { echo "ExecStart passes $flag, which tierkv-server does not know"; exit 1; }
done
echo "systemd unit test: ok"
