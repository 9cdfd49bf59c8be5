#include "tools/cli_rest.h"

#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tierkv::cli {
namespace {

// GETs `path` (with query `params`) from the API at `url`; false with a message
// on transport errors or the API's error body.
bool Fetch(const std::string& url, const std::string& path, const httplib::Params& params,
           std::string* body, int* exit_code) {
  httplib::Client cli(url);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(10, 0);
  auto res = cli.Get(path, params, httplib::Headers{});
  if (!res) {
    std::fprintf(stderr, "tierkv: cannot reach the REST API at %s (%s)\n", url.c_str(),
                 httplib::to_string(res.error()).c_str());
    *exit_code = 3;
    return false;
  }
  *body = res->body;
  if (res->get_header_value("Content-Type").rfind("application/json", 0) == 0) {
    auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (j.is_object() && j.contains("success") && j["success"] == false) {
      const std::string msg = j.value("error_message", "error");
      std::fprintf(stderr, "tierkv: %s\n", msg.c_str());
      *exit_code = msg.find("NOT_FOUND") != std::string::npos ? 1 : 3;
      return false;
    }
  }
  return true;
}

std::string Human(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

}  // namespace

int RunStatSummary(const std::string& url) {
  std::string body;
  int rc = 0;
  if (!Fetch(url, "/metrics/summary", {}, &body, &rc)) return rc;
  // key=value pairs, printed as an aligned table, grouped as the API orders them.
  std::istringstream in(body);
  std::string kv;
  while (in >> kv) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::printf("%-32s %s\n", kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str());
  }
  return 0;
}

int RunSegments(const std::string& url) {
  std::string body;
  int rc = 0;
  if (!Fetch(url, "/api/v1/capacity/segment_remaining", {}, &body, &rc)) return rc;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) {
    std::fprintf(stderr, "tierkv: unexpected reply from %s\n", url.c_str());
    return 3;
  }
  std::printf("%-20s %-6s %12s %12s %12s %7s\n", "SEGMENT", "MEDIUM", "TOTAL", "USED", "FREE",
              "FREE%");
  for (const auto& s : j["segments"]) {
    std::printf("%-20s %-6s %12s %12s %12s %6.1f%%\n", s["segment_name"].get<std::string>().c_str(),
                s["medium"].get<std::string>().c_str(),
                Human(s["total_bytes"].get<uint64_t>()).c_str(),
                Human(s["used_bytes"].get<uint64_t>()).c_str(),
                Human(s["remaining_bytes"].get<uint64_t>()).c_str(),
                100.0 * s["remaining_ratio"].get<double>());
  }
  return 0;
}

int RunMembers(const std::string& url) {
  std::string body;
  int rc = 0;
  if (!Fetch(url, "/cluster/members", {}, &body, &rc)) return rc;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("members") || !j["members"].is_array()) {
    std::fprintf(stderr, "tierkv: unexpected reply from %s\n", url.c_str());
    return 3;
  }
  if (j.value("mode", "") != "cluster") {
    std::printf("standalone manager (no cluster)\n");
    return 0;
  }
  std::printf("cluster %s, revision %lld, %zu members\n", j.value("cluster", "").c_str(),
              static_cast<long long>(j.value("revision", int64_t{0})), j["members"].size());
  std::printf("%-20s %5s %-22s %-22s %6s %6s %s\n", "NODE", "RANK", "ENDPOINT", "DATA", "EPOCH",
              "INCARN", "SINCE");
  for (const auto& m : j["members"]) {
    std::printf("%-20s %5u %-22s %-22s %6llu %6llu %s\n", m.value("node_id", "").c_str(),
                m.value("rank", 0u), m.value("endpoint", "").c_str(),
                m.value("data_endpoint", "-").empty() ? "-" : m.value("data_endpoint", "").c_str(),
                static_cast<unsigned long long>(m.value("epoch", uint64_t{0})),
                static_cast<unsigned long long>(m.value("incarnation", uint64_t{0})),
                m.value("since", "").c_str());
  }
  return 0;
}

int RunKey(const std::string& url, const std::string& key, const std::string& tenant) {
  std::string body;
  int rc = 0;
  if (!Fetch(url, "/query_key", {{"key", key}, {"tenant", tenant}}, &body, &rc)) return rc;
  const auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  std::printf("%s\n", j.is_discarded() ? body.c_str() : j.dump(2).c_str());
  return 0;
}

}  // namespace tierkv::cli
