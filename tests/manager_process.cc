#include "manager_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace tierkv::testing {
namespace {

// The manager binary: TIERKV_SERVER_BIN from the environment when set (a
// sanitizer build of the server under the normal build's tests and soaks),
// else the one this build made.
std::string ServerBinary() {
  const char* env = std::getenv("TIERKV_SERVER_BIN");
  return env != nullptr && *env != '\0' ? env : TIERKV_SERVER_BIN;
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "ManagerProcess: %s\n", msg.c_str());
  std::abort();
}

std::vector<char*> Argv(const std::vector<std::string>& args) {
  std::vector<char*> out;
  for (const auto& a : args) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

int WaitStatus(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

void ReadAll(int fd, std::string* out) {
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
}

}  // namespace

// The manager's stderr, passed on to the test's as it comes; the last few KiB
// are kept to say why a start failed.
struct ManagerProcess::StderrTail {
  std::mutex mu;
  std::condition_variable cv;
  std::string text;
  bool ended = false;

  static std::shared_ptr<StderrTail> Follow(int fd) {
    auto tail = std::make_shared<StderrTail>();
    std::thread([tail, fd] {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) {
        (void)!write(STDERR_FILENO, buf, static_cast<size_t>(n));
        std::lock_guard lock(tail->mu);
        tail->text.append(buf, static_cast<size_t>(n));
        if (tail->text.size() > 8192) tail->text.erase(0, tail->text.size() - 8192);
      }
      close(fd);
      std::lock_guard lock(tail->mu);
      tail->ended = true;
      tail->cv.notify_all();
    }).detach();
    return tail;
  }
  // What it has printed, once it has closed its stderr (up to 2 s).
  std::string Final() {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(2), [&] { return ended; });
    return text;
  }
};

ManagerProcess::ManagerProcess(std::vector<std::string> extra_args) {
  std::string why;
  if (!Start(std::move(extra_args), &why)) Die(why);
}

std::unique_ptr<ManagerProcess> ManagerProcess::TryStart(std::vector<std::string> extra_args,
                                                         std::string* why) {
  std::unique_ptr<ManagerProcess> m(new ManagerProcess(Unstarted{}));
  if (!m->Start(std::move(extra_args), why)) return nullptr;
  return m;
}

bool ManagerProcess::Start(std::vector<std::string> extra_args, std::string* why) {
  char tmpl[] = "/tmp/tierkv-it-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  dir_ = tmpl;
  socket_path_ = dir_ + "/tierkv.sock";
  auto given = [&](const char* flag) {
    for (size_t i = 0; i + 1 < extra_args.size(); ++i) {
      if (extra_args[i] == flag) return extra_args[i + 1];
    }
    return std::string("\x01");  // not given
  };
  std::vector<std::string> args = {ServerBinary()};
  if (given("--log-level") == "\x01") args.insert(args.end(), {"--log-level", "warn"});
  if (given("--dram-size") == "\x01") args.insert(args.end(), {"--dram-size", "64MiB"});
  if (given("--listen") == "\x01") args.insert(args.end(), {"--listen", "127.0.0.1:0"});
  if (given("--metrics-url") == "\x01") {
    args.insert(args.end(), {"--metrics-url", "http://127.0.0.1:0"});
  }
  if (given("--uds-path") == "\x01") {
    args.insert(args.end(), {"--uds-path", socket_path_});
  } else {
    socket_path_ = given("--uds-path");
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) Die("pipe failed");
  pid_ = fork();
  if (pid_ < 0) Die("fork failed");
  if (pid_ == 0) {
    // A test that crashes must not leave its manager behind (holding the test
    // runner's output pipe open).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    auto argv = Argv(args);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  std::shared_ptr<StderrTail> err = StderrTail::Follow(err_pipe[0]);
  // Read stdout until both addresses are printed (or 20 s pass).
  std::string text;
  auto fail = [&](const std::string& what) {
    kill(pid_, SIGKILL);
    WaitStatus(pid_);
    pid_ = -1;
    close(out_pipe[0]);
    *why = what + ": stdout [" + text + "] stderr [" + err->Final() + "]";
    return false;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (tcp_.empty() || uds_.empty() || rest_.empty()) {
    pollfd p{out_pipe[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline) return fail("manager did not start");
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    const ssize_t n = read(out_pipe[0], buf, sizeof(buf));
    if (n <= 0) return fail("manager exited during start");
    text.append(buf, static_cast<size_t>(n));
    const std::pair<const char*, std::string*> lines[] = {
        {"listening on unix:", &uds_}, {"listening on tcp://", &tcp_}, {"rest api on ", &rest_}};
    for (const auto& [prefix, out] : lines) {
      const size_t at = text.find(prefix);
      if (at == std::string::npos) continue;
      const size_t begin = at + std::string_view(prefix).rfind(' ') + 1;
      const size_t end = text.find_first_of(" \n", begin);
      if (end == std::string::npos) continue;
      *out = text.substr(begin, end - begin);
    }
  }
  startup_output_ = text;
  // Keep draining stdout so the manager never blocks on a full pipe; with
  // TIERKV_TEST_MANAGER_LOG set, its log lines go on to the test's stderr.
  const int fd = out_pipe[0];
  const bool pass_on = std::getenv("TIERKV_TEST_MANAGER_LOG") != nullptr;
  std::thread([fd, pass_on] {
    char buf[512];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) {
      if (pass_on) (void)!write(STDERR_FILENO, buf, static_cast<size_t>(n));
    }
    close(fd);
  }).detach();
  return true;
}

ManagerProcess::~ManagerProcess() {
  if (pid_ > 0) Stop(SIGKILL);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

int64_t ScrapeMetric(const ManagerProcess& m, const std::string& series) {
  httplib::Client http(m.rest());
  auto res = http.Get("/metrics");
  if (!res) return -1;
  const std::string& body = res->body;
  for (size_t at = 0; (at = body.find(series + " ", at)) != std::string::npos;
       at += series.size()) {
    if (at == 0 || body[at - 1] == '\n') return std::stoll(body.substr(at + series.size() + 1));
  }
  return -1;
}

namespace {

// A numeric field of /proc/PID/status ("VmRSS:", "Threads:"); 0 if absent.
uint64_t StatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size()));
  }
  return 0;
}

}  // namespace

UnlinkAtExit::~UnlinkAtExit() { unlink(path_.c_str()); }

uint64_t ProcessRssBytes(pid_t pid) { return StatusField(pid, "VmRSS:") * 1024; }

uint64_t ProcessThreads(pid_t pid) { return StatusField(pid, "Threads:"); }

int ManagerProcess::Stop(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  const int rc = WaitStatus(pid_);
  pid_ = -1;
  return rc;
}

int RunCommand(const std::vector<std::string>& argv, const std::string& input, std::string* out,
               std::string* err) {
  char out_name[] = "/tmp/tierkv-cmd-out-XXXXXX";
  char err_name[] = "/tmp/tierkv-cmd-err-XXXXXX";
  char in_name[] = "/tmp/tierkv-cmd-in-XXXXXX";
  const int out_fd = mkstemp(out_name);
  const int err_fd = mkstemp(err_name);
  const int in_fd = mkstemp(in_name);
  (void)!write(in_fd, input.data(), input.size());
  lseek(in_fd, 0, SEEK_SET);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    auto a = Argv(argv);
    execv(a[0], a.data());
    _exit(127);
  }
  const int rc = WaitStatus(pid);
  lseek(out_fd, 0, SEEK_SET);
  lseek(err_fd, 0, SEEK_SET);
  out->clear();
  err->clear();
  ReadAll(out_fd, out);
  ReadAll(err_fd, err);
  for (int fd : {out_fd, err_fd, in_fd}) close(fd);
  for (const char* n : {out_name, err_name, in_name}) unlink(n);
  return rc;
}

int RunServerExpectingFailure(const std::vector<std::string>& args, std::string* err) {
  std::vector<std::string> argv = {ServerBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  return RunCommand(argv, "", &out, err);
}

}  // namespace tierkv::testing
