// Must NOT compile under tests/thread_safety_test.sh: it reads a shard's map
// without the shard's lock. Proves the analysis is on and sees the guards.
#include "store/shard.h"

size_t UnlockedSize(tierkv::storage::Shard& shard) { return shard.map.size(); }
