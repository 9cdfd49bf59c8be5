// tierkv: command-line client of a tierkv manager.
//
//   tierkv [--address ADDR] [--tenant T] put KEY [FILE|-] [--group G] [--upsert]
//   tierkv ... get KEY [FILE|-]      tierkv ... rm KEY...     tierkv ... ls [PREFIX]
//   tierkv ... stat KEY              tierkv ... exists KEY
//   tierkv events [--endpoint tcp://127.0.0.1:5557] [--json] [--count N]
//   tierkv [--rest URL] stat | segments | members | key KEY   (read the REST admin API)
//
// Exit status: 0 success; 1 the key (or one of the keys) was not found; 2 usage
// error; 3 any other error (the message names the code and cause).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "tierkv/client.h"
#include "tools/cli_events.h"
#include "tools/cli_rest.h"

namespace {

using tierkv::Code;
using tierkv::Status;

int ExitFor(const Status& st) {
  if (st.ok()) return 0;
  std::fprintf(stderr, "tierkv: %s\n", st.ToString().c_str());
  return st.code() == Code::kNotFound ? 1 : 3;
}

bool ReadInput(const std::string& path, std::string* out) {
  if (path.empty() || path == "-") {
    out->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

std::string MediaText(uint32_t mask) {
  std::string out;
  for (int m = 0; m < tierkv::kMediumCount; ++m) {
    if (mask & (1u << m)) {
      if (!out.empty()) out += ",";
      out += tierkv::MediumName(static_cast<tierkv::Medium>(m));
    }
  }
  return out.empty() ? "-" : out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tierkv: command-line client of a tierkv manager", "tierkv"};
  const char* env_addr = std::getenv("TIERKV_ADDRESS");
  std::string address = env_addr ? env_addr : "unix:/tmp/tierkv.sock";
  std::string tenant(tierkv::kDefaultTenant);
  app.add_option("-a,--address", address,
                 "manager address: unix:PATH or tcp://HOST:PORT (env TIERKV_ADDRESS)")
      ->capture_default_str();
  app.add_option("-t,--tenant", tenant, "tenant of the keys")->capture_default_str();
  bool local_only = false;
  app.add_flag("--local-only", local_only,
               "stat and exists: ask only the manager addressed, not the cluster's index");
  std::string name_space;
  app.add_option("--namespace", name_space,
                 "storage namespace recorded with what is put (tierkv:v1:<64 hex>)");
  app.require_subcommand(1);

  std::string key, file, group, prefix;
  std::vector<std::string> keys;
  bool upsert = false;
  uint32_t limit = 0;
  auto* put = app.add_subcommand("put", "store a value read from FILE or standard input");
  put->add_option("key", key, "object key")->required();
  put->add_option("file", file, "input file ('-' or none: standard input)");
  put->add_option("-g,--group", group, "group id stored with the object");
  put->add_flag("-u,--upsert", upsert, "replace the value if the key exists");
  auto* get = app.add_subcommand("get", "write a value to FILE or standard output");
  get->add_option("key", key, "object key")->required();
  get->add_option("file", file, "output file ('-' or none: standard output)");
  auto* rm = app.add_subcommand("rm", "remove keys");
  rm->add_option("keys", keys, "object keys")->required();
  auto* ls = app.add_subcommand("ls", "list keys of the tenant");
  ls->add_option("prefix", prefix, "only keys starting with this");
  ls->add_option("-n,--limit", limit, "at most this many keys (0: all)");
  const char* env_rest = std::getenv("TIERKV_REST");
  std::string rest_url = env_rest ? env_rest : "http://127.0.0.1:8000";
  app.add_option("-r,--rest", rest_url, "REST admin API URL (env TIERKV_REST)")
      ->capture_default_str();
  auto* stat = app.add_subcommand(
      "stat",
      "with KEY: an object's size, media, leases and group; without: the manager's summary");
  stat->add_option("key", key, "object key (omit for the manager summary, read over REST)");
  auto* segments = app.add_subcommand("segments", "capacity of each segment (REST)");
  auto* members = app.add_subcommand("members", "the cluster's live members (REST)");
  auto* keycmd = app.add_subcommand("key", "the REST view of one key (/query_key)");
  keycmd->add_option("key", key, "object key")->required();
  auto* exists = app.add_subcommand("exists", "exit 0 when the key is stored, 1 when not");
  exists->add_option("key", key, "object key")->required();

  tierkv::cli::EventsOptions ev;
  auto* events = app.add_subcommand("events", "follow the KV event stream and print each event");
  events->add_option("-e,--endpoint", ev.endpoint, "the manager's --kv-events-endpoint")
      ->capture_default_str();
  events->add_flag("--json", ev.json, "one JSON object per event");
  events->add_option("-n,--count", ev.count, "stop after this many events");
  events->add_option("--seconds", ev.seconds, "stop after this many seconds");
  events
      ->add_option("--stats-every", ev.stats_every,
                   "seconds between rate/gap lines on stderr (0: off)")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (*events) return tierkv::cli::RunEvents(ev);
  if (*stat && key.empty()) return tierkv::cli::RunStatSummary(rest_url);
  if (*segments) return tierkv::cli::RunSegments(rest_url);
  if (*members) return tierkv::cli::RunMembers(rest_url);
  if (*keycmd) return tierkv::cli::RunKey(rest_url, key, tenant);

  tierkv::ClientOptions options;
  options.client_name = "tierkv-cli";
  options.name_space = name_space;
  options.prefault_pool = false;
  auto client = tierkv::Client::Connect(address, options);
  if (!client.ok()) {
    std::fprintf(stderr, "tierkv: %s\n", client.status().ToString().c_str());
    return 3;
  }
  tierkv::Client& c = **client;

  if (*put) {
    std::string value;
    if (!ReadInput(file, &value)) {
      std::fprintf(stderr, "tierkv: cannot read %s\n", file.c_str());
      return 3;
    }
    tierkv::WriteOptions wo{tenant, group};
    return ExitFor(upsert ? c.Upsert(key, value, wo) : c.Put(key, value, wo));
  }
  if (*get) {
    auto value = c.Get(key, tenant);
    if (!value.ok()) return ExitFor(value.status());
    if (file.empty() || file == "-") {
      std::fwrite(value->data(), 1, value->size(), stdout);
      return std::fflush(stdout) == 0 ? 0 : 3;
    }
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(value->data(), static_cast<std::streamsize>(value->size()));
    if (!out) {
      std::fprintf(stderr, "tierkv: cannot write %s\n", file.c_str());
      return 3;
    }
    return 0;
  }
  if (*rm) {
    std::vector<std::string_view> views(keys.begin(), keys.end());
    int rc = 0;
    auto results = c.BatchRemove(views, tenant);
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        std::fprintf(stderr, "tierkv: %s: %s\n", keys[i].c_str(), results[i].ToString().c_str());
        rc = std::max(rc, results[i].code() == Code::kNotFound ? 1 : 3);
      }
    }
    return rc;
  }
  if (*ls) {
    auto list = c.ListKeys(tenant, prefix, limit);
    if (!list.ok()) return ExitFor(list.status());
    for (const auto& k : list->keys) std::printf("%s\n", k.c_str());
    if (list->truncated) std::fprintf(stderr, "tierkv: list truncated by the reply size limit\n");
    return 0;
  }
  if (*stat) {
    auto info = c.Query(key, tenant, {local_only});
    if (!info.ok()) return ExitFor(info.status());
    std::printf(
        "key:     %s\ntenant:  %s\nsize:    %llu\nmedia:   %s\ngroup:   %s\n"
        "leases:  %u\nnamespace: %s\n",
        key.c_str(), tenant.c_str(), static_cast<unsigned long long>(info->size),
        MediaText(info->media).c_str(), info->group_id.empty() ? "-" : info->group_id.c_str(),
        info->active_leases, info->name_space.empty() ? "-" : info->name_space.c_str());
    if (!info->owner.empty()) {  // cluster mode: held by another manager
      std::printf("owner:   %s (rank %u)\n", info->owner.c_str(), info->owner_rank);
    }
    return 0;
  }
  if (*exists) {
    Status st = c.Exist(key, tenant, {local_only});
    if (st.code() == Code::kNotFound) return 1;
    return ExitFor(st);
  }
  return 2;
}
