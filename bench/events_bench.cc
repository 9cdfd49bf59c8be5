// tierkv_events_bench: KV event stream throughput, in one run.
//
//  1. Publisher throughput: events announced from one thread into an in-process
//     publisher (ZMQ PUB on an ipc endpoint, one SUB draining it) until all are
//     published; events/s.
//  2. Put throughput with events on vs off: two managers started side by side,
//     4 KiB puts from one client over the Unix socket, five rounds alternated
//     (each waits until the "on" manager has published everything of the one
//     before); the best round of each; ratio on/off.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "bench_util.h"
#include "events/publisher.h"
#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv::bench {
namespace {

double PublisherThroughput(uint64_t n) {
  const std::string endpoint = "ipc:///tmp/tierkv-evbench-" + std::to_string(getpid());
  events::PublisherOptions o;
  o.endpoint = endpoint;
  o.queue_capacity = n + 1;  // measure publishing, not dropping
  o.envelope.backend_id = "bench-node";
  o.envelope.model_name = "bench-model";
  events::KvEventPublisher pub(o, nullptr);
  if (!pub.Start().ok()) return 0;
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvhwm, 0);
  sub.set(zmq::sockopt::rcvtimeo, 200);
  sub.connect(endpoint);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received_msgs{0};
  std::thread drain([&] {
    while (!stop) {
      std::vector<zmq::message_t> frames;
      if (zmq::recv_multipart(sub, std::back_inserter(frames))) ++received_msgs;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string key_base = "model/prefix/0123456789abcdef/block-";
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) keys.push_back(key_base + std::to_string(i));
  const double t0 = NowSeconds();
  for (uint64_t i = 0; i < n; ++i) {
    pub.OnStored(ReplicaEvent{"default", keys[i % keys.size()], "", Medium::kDram, 4096});
  }
  while (pub.Stats().published_events < n)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  const double seconds = NowSeconds() - t0;
  stop = true;
  drain.join();
  pub.Stop();
  std::printf(
      "publisher: %llu events in %.3f s, %llu messages published, %llu received by the SUB\n",
      static_cast<unsigned long long>(n), seconds,
      static_cast<unsigned long long>(pub.Stats().published_batches),
      static_cast<unsigned long long>(received_msgs.load()));
  return n / seconds;
}

double PutRate(const std::string& address, uint64_t ops, int round) {
  auto c = Client::Connect(address);
  if (!c.ok()) return 0;
  std::string value(4096, 'v');
  const double t0 = NowSeconds();
  for (uint64_t i = 0; i < ops; ++i) {
    (void)(*c)->Put("r" + std::to_string(round) + "/" + std::to_string(i), value);
  }
  const double rate = ops / (NowSeconds() - t0);
  (void)(*c)->RemoveAll(kDefaultTenant, true);
  return rate;
}

// Waits until the manager's event queue is empty, so events of one round are
// not published while the next round (of either manager) is measured.
void WaitDrained(const std::string& rest) {
  httplib::Client http(rest);
  for (int i = 0; i < 500; ++i) {
    auto res = http.Get("/kv_events/status");
    if (res && res->body.find("\"queue_size\":0,") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace
}  // namespace tierkv::bench

int main(int argc, char** argv) {
  using namespace tierkv::bench;
  bool quick = false;
  bool subscriber = true;  // --no-subscriber: nobody listens (PUB drops at once)
  std::string linger_us;   // --linger-us N: the "on" manager's --kv-events-batch-linger-us
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--no-subscriber") {
      subscriber = false;
    } else if (a == "--linger-us" && i + 1 < argc) {
      linger_us = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: tierkv_events_bench [--quick] [--no-subscriber] [--linger-us N]\n");
      return 2;
    }
  }
  const double eps = PublisherThroughput(quick ? 200000 : 2000000);
  tierkv::testing::ManagerProcess off({"--dram-size", "512MiB", "--log-level", "error"});
  const std::string endpoint = "ipc:///tmp/tierkv-evbench-mgr-" + std::to_string(getpid());
  std::vector<std::string> on_args = {"--dram-size",          "512MiB", "--log-level", "error",
                                      "--kv-events-endpoint", endpoint};
  if (!linger_us.empty()) on_args.insert(on_args.end(), {"--kv-events-batch-linger-us", linger_us});
  tierkv::testing::ManagerProcess on(on_args);
  // A subscriber on the "on" manager, so events are really sent (on this host,
  // so its CPU time competes with the client and the manager).
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 100);
  if (subscriber) sub.connect(endpoint);
  std::atomic<bool> stop{!subscriber};
  std::thread drain([&] {
    while (!stop) {
      std::vector<zmq::message_t> frames;
      (void)zmq::recv_multipart(sub, std::back_inserter(frames));
    }
  });
  const uint64_t ops = quick ? 20000 : 100000;
  constexpr int kRounds = 5;
  double best_off = 0, best_on = 0;
  for (int round = 0; round < kRounds; ++round) {
    best_off = std::max(best_off, PutRate(off.uds(), ops, round));
    best_on = std::max(best_on, PutRate(on.uds(), ops, round));
    WaitDrained(on.rest());
  }
  stop = true;
  drain.join();
  std::printf("\n%-44s %12s %8s %6s\n", "figure (same run)", "value", "target", "met");
  std::printf("%-44s %12.0f %8s %6s\n", "publisher events/s", eps, "1000000",
              eps >= 1e6 ? "yes" : "NO");
  std::printf("%-44s %12s\n", "subscriber on this host", subscriber ? "yes" : "no");
  std::printf("%-44s %12.0f\n", "4 KiB puts/s, events off (best of 5)", best_off);
  std::printf("%-44s %12.0f\n", "4 KiB puts/s, events on (best of 5)", best_on);
  const double ratio = best_off > 0 ? best_on / best_off : 0;
  std::printf("%-44s %12.3f %8s %6s\n", "put throughput on / off", ratio, "0.95",
              ratio >= 0.95 ? "yes" : "NO");
  return 0;
}
