#include "redis_peer.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace tierkv::bench {

RedisPeer::RedisPeer() {
  dir_ = MakePeerDir("redis");
  if (dir_.empty()) return;
  socket_ = dir_ + "/redis.sock";
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", socket_.c_str(),
           "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir_.c_str(),
           "--maxmemory", "0", "--protected-mode", "no", static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid < 0) return;
  const bool up = AwaitPeer(pid, [&] {
    redisContext* c = redisConnectUnix(socket_.c_str());
    const bool ok = c != nullptr && c->err == 0;
    if (c) redisFree(c);
    return ok;
  });
  if (up) pid_ = pid;
}

RedisPeer::~RedisPeer() { StopPeer(pid_, dir_); }

bool RedisPeer::RunSetGet(uint64_t size, uint64_t count, bool warm, Series* put, Series* get) {
  redisContext* c = redisConnectUnix(socket_.c_str());
  if (c == nullptr || c->err) return false;
  std::string value(size, 'r');
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < count; ++i) keys.push_back("bench:" + std::to_string(i));
  bool ok = true;
  if (warm) {
    for (const auto& k : keys) {
      auto* r = static_cast<redisReply*>(
          redisCommand(c, "SET %b %b", k.data(), k.size(), value.data(), value.size()));
      ok = ok && r != nullptr && r->type == REDIS_REPLY_STATUS;
      if (r) freeReplyObject(r);
    }
  }
  double t0 = NowSeconds();
  for (const auto& k : keys) {
    const double s = NowSeconds();
    auto* r = static_cast<redisReply*>(
        redisCommand(c, "SET %b %b", k.data(), k.size(), value.data(), value.size()));
    put->latencies.push_back(NowSeconds() - s);
    ok = ok && r != nullptr && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
  }
  put->seconds = NowSeconds() - t0;
  put->ops = count;
  put->object_bytes = size;
  // The reply buffer is hiredis's own; copying it out is the client's part of
  // the work, as a tierkv get copies into the caller's buffer.
  std::string out(size, '\0');
  t0 = NowSeconds();
  for (const auto& k : keys) {
    const double s = NowSeconds();
    auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", k.data(), k.size()));
    if (r != nullptr && r->type == REDIS_REPLY_STRING && r->len == static_cast<size_t>(size)) {
      std::memcpy(out.data(), r->str, r->len);
    } else {
      ok = false;
    }
    get->latencies.push_back(NowSeconds() - s);
    if (r) freeReplyObject(r);
  }
  get->seconds = NowSeconds() - t0;
  get->ops = count;
  get->object_bytes = size;
  for (const auto& k : keys) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "DEL %b", k.data(), k.size()));
    if (r) freeReplyObject(r);
  }
  redisFree(c);
  return ok;
}

bool RedisPeer::Preload(uint64_t count, uint64_t size) {
  redisContext* c = redisConnectUnix(socket_.c_str());
  if (c == nullptr || c->err) return false;
  const std::string value(size, 'p');
  char key[32];
  bool ok = true;
  constexpr uint64_t kWindow = 256;  // pipelined: appended, then the answers read
  for (uint64_t base = 0; base < count; base += kWindow) {
    const uint64_t end = std::min(count, base + kWindow);
    for (uint64_t i = base; i < end; ++i) {
      const int n =
          std::snprintf(key, sizeof(key), "key:%012llu", static_cast<unsigned long long>(i));
      redisAppendCommand(c, "SET %b %b", key, static_cast<size_t>(n), value.data(), value.size());
    }
    for (uint64_t i = base; i < end; ++i) {
      void* reply = nullptr;
      ok = ok && redisGetReply(c, &reply) == REDIS_OK;
      if (reply) freeReplyObject(reply);
    }
  }
  redisFree(c);
  return ok;
}

double RedisPeer::CommandOps(const std::string& command, int pipeline, int clients,
                             uint64_t requests, uint64_t keyspace) {
  const std::string cmd = "redis-benchmark -s " + socket_ + " -P " + std::to_string(pipeline) +
                          " -c " + std::to_string(clients) + " -n " + std::to_string(requests) +
                          " -r " + std::to_string(keyspace) + " -q --csv " + command +
                          " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  char line[512];
  double ops = 0;
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    // "GET key:__rand_int__","123456.78",...
    const char* sep = std::strstr(line, "\",\"");
    if (sep != nullptr && ops == 0) ops = std::atof(sep + 3);
  }
  pclose(p);
  return ops;
}

double RedisPeer::PipelinedGetOps(uint64_t size, int pipeline, int clients, uint64_t requests) {
  const std::string cmd = "redis-benchmark -s " + socket_ + " -t set,get -P " +
                          std::to_string(pipeline) + " -c " + std::to_string(clients) + " -n " +
                          std::to_string(requests) + " -d " + std::to_string(size) +
                          " -q --csv 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  char line[512];
  double ops = 0;
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    // "GET","123456.78",...
    if (std::strncmp(line, "\"GET\",\"", 7) == 0) ops = std::atof(line + 7);
  }
  pclose(p);
  return ops;
}

}  // namespace tierkv::bench
