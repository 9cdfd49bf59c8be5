#include "etcd_process.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "manager_process.h"

namespace tierkv::testing {
namespace {

constexpr const char* kEtcdBin = "/usr/bin/etcd";

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "EtcdCluster: %s\n", msg.c_str());
  std::abort();
}

void Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// Whether a plain bind of 127.0.0.1:`port` (0: any port) succeeds; the port
// bound, or 0.
int BindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof a;
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    bound = ntohs(a.sin_port);
  }
  close(fd);
  return bound;
}

// The lowest port of the kernel's ephemeral range (32768 when unreadable).
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return in ? low : 32768;
}

}  // namespace

// Chosen below the kernel's ephemeral range when there is room: a port from
// that range, once closed, can be given to any process's outgoing connection
// (a gRPC client dialing etcd or a peer, say) before the server it was meant
// for binds it. Random, so concurrent tests rarely try the same one.
int FreeLoopbackPort() {
  constexpr int kFirst = 10000;
  static std::mutex mu;
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  const int low = EphemeralLow();
  if (low - kFirst >= 1000) {
    std::lock_guard<std::mutex> lock(mu);
    for (int tries = 0; tries < 100; ++tries) {
      const int port = kFirst + static_cast<int>(rng() % static_cast<unsigned>(low - kFirst));
      if (BindLoopback(port) == port) return port;
    }
  }
  const int port = BindLoopback(0);
  if (port == 0) Die("cannot find a free port");
  return port;
}

EtcdCluster::EtcdCluster(int members) {
  if (access(kEtcdBin, X_OK) != 0) {
    Die(std::string(kEtcdBin) + " is missing: run scripts/deps.sh (package etcd-server)");
  }
  char tmpl[] = "/tmp/tierkv-etcd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  dir_ = tmpl;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "e" + std::to_string(i);
    m.client_port = FreeLoopbackPort();
    m.peer_port = FreeLoopbackPort();
    if (!initial_cluster_.empty()) initial_cluster_ += ",";
    initial_cluster_ += m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
    members_.push_back(m);
  }
  for (int i = 0; i < members; ++i) Spawn(i, false);
  for (int i = 0; i < members; ++i) {
    if (!WaitFor([&] { return Healthy(i); }, 30000)) Die("etcd did not become healthy");
  }
}

void EtcdCluster::Spawn(int i, bool existing) {
  Member& m = members_[static_cast<size_t>(i)];
  const std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
  const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  std::vector<std::string> args = {kEtcdBin,
                                   "--name",
                                   m.name,
                                   "--data-dir",
                                   dir_ + "/" + m.name,
                                   "--listen-client-urls",
                                   client,
                                   "--advertise-client-urls",
                                   client,
                                   "--listen-peer-urls",
                                   peer,
                                   "--initial-advertise-peer-urls",
                                   peer,
                                   "--initial-cluster",
                                   initial_cluster_,
                                   "--initial-cluster-state",
                                   existing ? "existing" : "new",
                                   "--initial-cluster-token",
                                   "tierkv-test",
                                   "--unsafe-no-fsync",
                                   "--heartbeat-interval",
                                   "50",
                                   "--election-timeout",
                                   "500",
                                   "--log-level",
                                   "error"};
  const pid_t pid = fork();
  if (pid < 0) Die("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string log = dir_ + "/" + m.name + ".log";
    FILE* f = std::fopen(log.c_str(), "a");
    if (f != nullptr) {
      dup2(fileno(f), STDOUT_FILENO);
      dup2(fileno(f), STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  m.pid = pid;
}

EtcdCluster::~EtcdCluster() {
  for (Member& m : members_) {
    if (m.pid > 0) {
      kill(m.pid, SIGCONT);
      kill(m.pid, SIGKILL);
      Reap(m.pid);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string EtcdCluster::client_addr(int i) const {
  return "127.0.0.1:" + std::to_string(members_[static_cast<size_t>(i)].client_port);
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (int i = 0; i < size(); ++i) out += (i ? "," : "") + client_addr(i);
  return out;
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[static_cast<size_t>(i)];
  if (m.pid <= 0) return;
  kill(m.pid, SIGCONT);
  kill(m.pid, SIGKILL);
  Reap(m.pid);
  m.pid = -1;
}

// Returns once the member is stopped (kill() returns before the signal has
// taken effect; until then the member could still answer a request).
void EtcdCluster::Pause(int i) {
  const pid_t pid = members_[static_cast<size_t>(i)].pid;
  kill(pid, SIGSTOP);
  const bool stopped = WaitFor(
      [&] {
        std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
        std::string line;
        std::getline(in, line);
        const size_t paren = line.rfind(')');
        return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T';
      },
      5000);
  if (!stopped) Die("etcd member " + std::to_string(i) + " did not stop");
}
void EtcdCluster::Resume(int i) { kill(members_[static_cast<size_t>(i)].pid, SIGCONT); }

void EtcdCluster::Restart(int i) {
  Kill(i);
  Spawn(i, true);
}

bool EtcdCluster::Healthy(int i) const {
  httplib::Client http("127.0.0.1", members_[static_cast<size_t>(i)].client_port);
  http.set_connection_timeout(0, 300000);
  http.set_read_timeout(1, 0);
  auto res = http.Get("/health");
  return res && res->status == 200 && res->body.find("\"true\"") != std::string::npos;
}

}  // namespace tierkv::testing
