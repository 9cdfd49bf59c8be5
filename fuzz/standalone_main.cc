// A libFuzzer-compatible driver for builds without libFuzzer (g++): replays
// every file of the given corpus directories, then mutates them (bit flips,
// truncations, splices) until --seconds runs out. Used by `make test` for a
// short, deterministic run of each fuzz target; `make fuzz` uses libFuzzer.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  double seconds = 10;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
      continue;
    }
    for (const auto& e : std::filesystem::recursive_directory_iterator(a)) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (inputs.empty()) inputs.emplace_back();
  for (const std::string& in : inputs) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
  std::mt19937_64 rng(12345);  // deterministic: a failure reproduces
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < end) {
    std::string m = inputs[rng() % inputs.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 5) {
        case 0:
          if (!m.empty()) m[rng() % m.size()] ^= static_cast<char>(1u << (rng() % 8));
          break;
        case 1:
          if (!m.empty()) m.resize(rng() % m.size());
          break;
        case 2:
          m.insert(rng() % (m.size() + 1), 1, static_cast<char>(rng()));
          break;
        case 3: {
          const std::string& other = inputs[rng() % inputs.size()];
          if (!other.empty()) m += other.substr(rng() % other.size());
          break;
        }
        default:
          if (m.size() >= 4) {  // an interesting length/count value
            static const uint32_t kValues[] = {0, 1, 0x7fffffff, 0xffffffff, 4096, 65536};
            const uint32_t v = kValues[rng() % 6];
            std::memcpy(m.data() + rng() % (m.size() - 3), &v, 4);
          }
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(m.data()), m.size());
    ++runs;
  }
  std::printf("%zu corpus inputs and %llu mutations ran without a crash\n", inputs.size(),
              static_cast<unsigned long long>(runs));
  return 0;
}
