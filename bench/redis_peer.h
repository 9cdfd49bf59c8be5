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
  // connection; fills a put and a get series.
  bool RunSetGet(uint64_t size, uint64_t count, Series* put, Series* get);
  // redis-benchmark -t get -P <pipeline> -d <size>: GET requests per second.
  double PipelinedGetOps(uint64_t size, int pipeline, int clients, uint64_t requests);

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string socket_;
};

}  // namespace tierkv::bench

#endif  // TIERKV_BENCH_REDIS_PEER_H_
