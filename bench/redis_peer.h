// The Redis peer of the benchmark: a redis-server started on a private Unix
// socket, driven by hiredis with the same object sizes, and redis-benchmark for
// pipelined small GETs.
#ifndef TIERKV_BENCH_REDIS_PEER_H_
#define TIERKV_BENCH_REDIS_PEER_H_

#include <sys/types.h>

#include <string>

#include "bench_util.h"

namespace tierkv::bench {

class RedisPeer {
 public:
  RedisPeer();   // starts redis-server; ok() tells whether it came up
  ~RedisPeer();  // stops it
  bool ok() const { return pid_ > 0; }
  const std::string& socket() const { return socket_; }

  // SETs then GETs `count` distinct keys of `size` bytes over one hiredis
  // connection; fills a put and a get series. `warm`: the same keys are SET
  // once before the measured pass, so it overwrites (no first-touch page
  // faults in the server); otherwise the server starts empty.
  bool RunSetGet(uint64_t size, uint64_t count, bool warm, Series* put, Series* get);
  // redis-benchmark -t get -P <pipeline> -d <size>: GET requests per second.
  double PipelinedGetOps(uint64_t size, int pipeline, int clients, uint64_t requests);
  // Stores "key:%012d" for 0 <= i < count, `size` bytes each: the names
  // redis-benchmark's "key:__rand_int__" draws with -r count.
  bool Preload(uint64_t count, uint64_t size);
  // redis-benchmark running `command` (e.g. "GET key:__rand_int__") with
  // -P pipeline -c clients -r keyspace: requests per second.
  double CommandOps(const std::string& command, int pipeline, int clients, uint64_t requests,
                    uint64_t keyspace);

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string socket_;
};

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_REDIS_PEER_H_
