// WaitFor: the tests' bounded poll on a condition (no sleep as
// synchronisation). Header-only, for the unit tests beside the code too.
#ifndef TIERKV_TESTS_WAIT_FOR_H_
#define TIERKV_TESTS_WAIT_FOR_H_

#include <chrono>
#include <thread>

namespace tierkv::testing {

// Polls `fn` every 10 ms until it returns true (true) or `ms` pass (false).
template <typename Fn>
bool WaitFor(Fn fn, int ms = 10000) {
  for (int i = 0; i < ms / 10; ++i) {
    if (fn()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fn();
}

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_WAIT_FOR_H_
