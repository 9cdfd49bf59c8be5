#include "remote_bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace tierkv::bench {

namespace {

// `fd`, its small writes sent at once (both baselines' sockets).
int NoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

double RawTcpGBps(uint64_t size, uint64_t total, int streams, bool fetched, bool distinct) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  listen(lfd, 16);
  // Whole messages per stream, at least one (a receiver that stopped in the
  // middle of a message would leave its sender blocked).
  const uint64_t per = std::max<uint64_t>(1, total / size / static_cast<uint64_t>(streams)) * size;
  std::vector<std::thread> threads;
  std::vector<int> senders;
  for (int s = 0; s < streams; ++s) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    senders.push_back(NoDelay(c));
  }
  std::vector<int> receivers;
  for (int s = 0; s < streams; ++s) {
    receivers.push_back(NoDelay(accept(lfd, nullptr, nullptr)));
  }
  // Buffers made and touched before the clock starts. Distinct: every
  // message has bytes of its own on both sides (as many as the measured path
  // moves, mostly out of the caches); otherwise one message-sized buffer per
  // side, reused (cache-hot).
  std::vector<std::vector<char>> srcs, dsts;
  for (int s = 0; s < streams; ++s) {
    srcs.emplace_back(distinct ? per : size, 'x');
    dsts.emplace_back(distinct ? per : size, 0);
  }
  const double t0 = NowSeconds();
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      std::vector<char>& src = srcs[s];
      for (uint64_t sent = 0; sent < per; sent += size) {
        uint64_t ask = 0;
        if (fetched && read(senders[s], &ask, sizeof(ask)) != sizeof(ask)) return;
        const char* from = src.data() + (distinct ? sent : 0);
        for (uint64_t off = 0; off < size;) {
          ssize_t n = write(senders[s], from + off, size - off);
          if (n <= 0) return;
          off += static_cast<uint64_t>(n);
        }
      }
    });
    threads.emplace_back([&, s] {
      std::vector<char>& dst = dsts[s];
      for (uint64_t got = 0; got < per;) {
        if (fetched && got % size == 0 && write(receivers[s], &got, sizeof(got)) != sizeof(got)) {
          return;
        }
        char* to = dst.data() + (distinct ? got - got % size : 0);
        ssize_t n = read(receivers[s], to + (got % size), size - (got % size));
        if (n <= 0) return;
        got += static_cast<uint64_t>(n);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double secs = NowSeconds() - t0;
  for (int fd : senders) close(fd);
  for (int fd : receivers) close(fd);
  close(lfd);
  return double(per * static_cast<uint64_t>(streams)) / secs / 1e9;
}

RemoteBenchArgs ParseRemoteBenchArgs(int argc, char** argv) {
  RemoteBenchArgs a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--json") == 0) a.json = argv[i + 1];
    if (std::strcmp(argv[i], "--mib") == 0) a.mib = std::stoull(argv[i + 1]);
  }
  return a;
}

void AddRateSeries(std::vector<Series>* out, uint64_t size, int threads, uint64_t bytes,
                   const std::vector<std::pair<std::string, double>>& rates) {
  for (const auto& [name, gbps] : rates) {
    Series s(name, size, threads);
    s.ops = bytes / size;
    s.seconds = double(bytes) / gbps / 1e9;
    out->push_back(std::move(s));
  }
}

}  // namespace tierkv::bench
