#!/usr/bin/env bash
# Clang's thread-safety analysis over the boxes that carry lock annotations
# (src/common/thread_annotations.h): builds them with clang++, where
# CMakeLists.txt turns every finding into an error, then checks that the
# analysis is really on by compiling a read of a shard's map without its lock
# (tests/thread_safety/unlocked_read.cc), which must be refused.
#   thread_safety_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
out="$2/thread-safety"  # kept between runs: an incremental build
command -v clang++ > /dev/null || { echo "clang++ is missing (scripts/deps.sh)"; exit 1; }
cmake -S "$src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
  -DTIERKV_BUILD_TESTS=OFF -DTIERKV_BUILD_BENCH=OFF -DTIERKV_BUILD_PYTHON=OFF > "$out.log" 2>&1 ||
  { cat "$out.log"; exit 1; }
cmake --build "$out" --target tierkv_store
flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror=thread-safety
  -I"$out/boxes/store" -I"$out/boxes/media" -I"$out/boxes/device" -I"$out/boxes/common"
  -I"$src/include")
if msg=$(clang++ "${flags[@]}" "$src/tests/thread_safety/unlocked_read.cc" 2>&1); then
  echo "an unlocked read of a shard's map compiled: the analysis is off"
  exit 1
fi
grep -q "requires holding mutex 'shard.mu'" <<< "$msg" ||
  { echo "the unlocked read failed for another reason:"; echo "$msg"; exit 1; }
echo "thread-safety analysis: ok"
