// ManagerProcess: starts the real tierkv-server binary on a private Unix socket
// and a loopback TCP port it picks itself, and stops it. Used by the integration
// tests; every test starts its own manager.
#ifndef TIERKV_TESTS_MANAGER_PROCESS_H_
#define TIERKV_TESTS_MANAGER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "wait_for.h"

namespace tierkv::testing {

class ManagerProcess {
 public:
  // Starts tierkv-server with `extra_args` added to the test defaults
  // (--dram-size 64MiB, a temp --uds-path, --listen 127.0.0.1:0); a default is
  // left out when `extra_args` sets that flag itself. Waits until it
  // prints its addresses. Aborts the test binary if it cannot start, with
  // what the manager printed (its stderr is also passed on to the test's).
  // The manager is SIGKILLed when the thread that started it ends
  // (PR_SET_PDEATHSIG), so start managers that must outlive a worker thread
  // on a thread that lives as long.
  explicit ManagerProcess(std::vector<std::string> extra_args = {});
  // The same, but a manager that cannot start is null and *why says what it
  // printed.
  static std::unique_ptr<ManagerProcess> TryStart(std::vector<std::string> extra_args,
                                                  std::string* why);
  ~ManagerProcess();  // SIGKILL if still running

  const std::string& uds() const { return uds_; }    // "unix:/tmp/..."
  const std::string& tcp() const { return tcp_; }    // "tcp://127.0.0.1:PORT"
  const std::string& rest() const { return rest_; }  // "http://127.0.0.1:PORT"
  const std::string& socket_path() const { return socket_path_; }
  pid_t pid() const { return pid_; }
  // What the manager printed on stdout up to its addresses (start-up log lines).
  const std::string& startup_output() const { return startup_output_; }

  // Sends `sig` and waits; returns the exit status (or 128 + signal).
  int Stop(int sig);

 private:
  struct StderrTail;
  struct Unstarted {};
  explicit ManagerProcess(Unstarted) {}
  // False (and *why) when the manager exits or says nothing in 20 s.
  bool Start(std::vector<std::string> extra_args, std::string* why);

  pid_t pid_ = -1;
  std::string dir_;
  std::string socket_path_;
  std::string uds_;
  std::string tcp_;
  std::string rest_;
  std::string startup_output_;
};

// The value of one sample of the manager's /metrics, named exactly as it
// appears (`name` or `name{labels}`); -1 when absent or unreachable.
int64_t ScrapeMetric(const ManagerProcess& m, const std::string& series);

// Unlinks `path` when it goes out of scope: the socket files a test or a
// benchmark binds itself (a killed manager leaves its own behind).
class UnlinkAtExit {
 public:
  explicit UnlinkAtExit(std::string path) : path_(std::move(path)) {}
  ~UnlinkAtExit();
  UnlinkAtExit(const UnlinkAtExit&) = delete;
  UnlinkAtExit& operator=(const UnlinkAtExit&) = delete;

 private:
  std::string path_;
};

// Resident set size of process `pid` in bytes (0 if it cannot be read).
uint64_t ProcessRssBytes(pid_t pid);
// Threads of process `pid` (0 if it cannot be read).
uint64_t ProcessThreads(pid_t pid);

// Runs `argv` (no shell), feeding `input` on stdin; returns the exit status and
// fills *out with stdout and *err with stderr.
int RunCommand(const std::vector<std::string>& argv, const std::string& input, std::string* out,
               std::string* err);

// Runs the server binary with `args` expecting it to fail at start; returns its
// exit status and stderr.
int RunServerExpectingFailure(const std::vector<std::string>& args, std::string* err);

// `n` pseudo-random bytes, the same for the same seed: values whose every
// byte a test can compare.
inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_MANAGER_PROCESS_H_
