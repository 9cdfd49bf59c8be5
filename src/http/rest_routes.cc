// The REST contract's endpoints. Field names and order follow the contract's
// examples exactly (nlohmann::ordered_json keeps insertion order).
#include <httplib.h>
#include <time.h>

#include <map>
#include <nlohmann/json.hpp>

#include "common/tracer.h"
#include "http/rest_body.h"
#include "http/rest_reply.h"
#include "http/rest_router.h"
#include "http/rest_server.h"

namespace tierkv {
namespace {

using namespace rest_reply;

// A required, non-empty query parameter; sends the error and returns false.
bool Param(const httplib::Request& req, httplib::Response& res, const char* name,
           std::string* out) {
  if (!req.has_param(name)) {
    SendError(res, std::string("missing query parameter '") + name + "'");
    return false;
  }
  *out = req.get_param_value(name);
  if (out->empty()) {
    SendError(res, std::string("query parameter '") + name + "' is empty");
    return false;
  }
  return true;
}

std::string TenantParam(const httplib::Request& req) {
  return req.has_param("tenant") ? req.get_param_value("tenant") : std::string(kDefaultTenant);
}

std::string TimeText() {
  const time_t now = time(nullptr);
  tm local;
  localtime_r(&now, &local);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

// The one-line text summary of a drain job, fields in this order: job_id
// state source segment objects_total objects_moved objects_failed bytes_moved
// started_ms finished_ms (finished_ms 0 while running).
std::string DrainSummary(const DrainJobView& v) {
  return "job_id=" + v.id + " state=" + v.state + " source=" + v.source +
         " segment=" + (v.segment.empty() ? "-" : v.segment) +
         " objects_total=" + std::to_string(v.total) + " objects_moved=" + std::to_string(v.moved) +
         " objects_failed=" + std::to_string(v.failed) + " bytes_moved=" + std::to_string(v.bytes) +
         " started_ms=" + std::to_string(v.started_unix_ms) +
         " finished_ms=" + std::to_string(v.finished_unix_ms);
}

std::string MediumUpper(Medium m) {
  switch (m) {
    case Medium::kHbm:
      return "HBM";
    case Medium::kDram:
      return "DRAM";
    case Medium::kSsd:
      return "SSD";
  }
  return "UNKNOWN";
}

// A segment's capacity record; the contract names its first field "segment"
// in /query_segment and "segment_name" in /api/v1/capacity/segment_remaining.
Json SegmentRecord(const SegmentInfo& s, const char* name_field) {
  Json j;
  j[name_field] = s.name;
  j["medium"] = MediumUpper(s.medium);
  j["total_bytes"] = s.total_bytes;
  j["used_bytes"] = s.used_bytes;
  j["remaining_bytes"] = s.total_bytes - s.used_bytes;
  j["remaining_ratio"] =
      s.total_bytes ? static_cast<double>(s.total_bytes - s.used_bytes) / s.total_bytes : 0.0;
  return j;
}

// One /query_key record; `info` null when the key is not stored here. In
// cluster mode `remote` lists the replicas other owners advertise (rank = the
// owner's); a key that is only remote is valid with the remote size.
Json KeyRecord(const std::string& key, const ObjectInfo* info, uint32_t rank, int64_t now_ms,
               const std::vector<RemoteBlobView>& remote = {}) {
  Json j;
  j["key"] = key;
  j["size"] = info ? info->size : (remote.empty() ? 0 : remote.front().size);
  j["prot"] = 0;
  Json blobs = Json::array();
  if (info) {
    for (int m = 0; m < kMediumCount; ++m) {
      if (!(info->media & (1u << m))) continue;
      Json b;
      b["rank"] = rank;
      b["medium"] = MediumUpper(static_cast<Medium>(m));
      b["gva"] = 0;
      b["state"] = static_cast<int>(info->state);
      b["leaseTimeoutTtlMs"] =
          info->lease_expires_unix_ms > now_ms ? info->lease_expires_unix_ms - now_ms : 0;
      blobs.push_back(b);
    }
  }
  for (const RemoteBlobView& r : remote) {
    Json b;
    b["rank"] = r.rank;
    b["medium"] = MediumUpper(static_cast<Medium>(r.medium));
    b["gva"] = 0;
    b["state"] = 2;  // READABLE on its owner
    b["leaseTimeoutTtlMs"] = 0;
    blobs.push_back(b);
  }
  j["numBlobs"] = blobs.size();
  j["valid"] = info != nullptr || !remote.empty();
  j["blobs"] = blobs;
  // Beyond the contract, and only for an object put with one: its storage namespace.
  if (info && !info->name_space.empty()) j["namespace"] = info->name_space;
  return j;
}

// The contract's paths and their methods, for 405 answers.
const std::map<std::string, std::string>& KnownPaths() {
  static const std::map<std::string, std::string> kPaths = {
      {"/metadata", "GET, PUT, DELETE"},
      {"/health", "GET"},
      {"/metrics", "GET"},
      {"/metrics/summary", "GET"},
      {"/metrics/ptracer", "GET"},
      {"/role", "GET"},
      {"/ha_status", "GET"},
      {"/leader", "GET"},
      {"/cluster/members", "GET"},
      {"/cache/metadata", "GET"},
      {"/cache/sync", "POST"},
      {"/cache/metadata/await", "POST"},
      {"/query_key", "GET"},
      {"/batch_query_keys", "GET"},
      {"/key", "DELETE"},
      {"/all_keys", "DELETE"},
      {"/get_all_keys", "GET"},
      {"/get_all_segments", "GET"},
      {"/query_segment", "GET"},
      {"/api/v1/drain_jobs", "POST"},
      {"/api/v1/drain_jobs/query", "GET"},
      {"/api/v1/drain_jobs/cancel", "POST"},
      {"/api/v1/segments/status", "GET"},
      {"/api/v1/capacity/usage", "GET"},
      {"/api/v1/capacity/segment_remaining", "GET"},
      {"/api/v1/analysis/alloc_free_latency", "GET"},
      {"/kv_events/status", "GET"},
      {"/memory/evict", "POST"},
      {"/memory/prefetch", "POST"},
  };
  return kPaths;
}

}  // namespace

void RestServer::Routes() {
  const httplib::Server::HandlerWithResponse on_error = [](const httplib::Request& req,
                                                           httplib::Response& res) {
    std::string msg;
    if (res.status == 404) {
      auto it = KnownPaths().find(req.path);
      if (it != KnownPaths().end()) {
        res.status = 405;
        msg =
            "method " + req.method + " is not allowed on " + req.path + " (use " + it->second + ")";
      } else {
        msg = "unknown path " + req.path;
      }
    } else if (res.status == 413) {
      msg = "request body too large";
    } else if (res.status == 414) {
      msg = "request URI too long";
    } else if (res.status == 400) {
      msg = "malformed HTTP request";
    } else {
      msg = "HTTP error " + std::to_string(res.status);
    }
    res.set_content(ErrorBody(msg, NowMs()), kJsonType);
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(on_error);
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = std::string("internal error: ") + e.what();
        } catch (...) {
        }
        res.status = 500;
        res.set_content(ErrorBody(what, NowMs()), kJsonType);
      });
  KeyRoutes();
  CapacityRoutes();
  MemoryRoutes();
  StatusRoutes();
}

void RestServer::KeyRoutes() {
  const Caller rest{0, options_.rank};
  Store* store = deps_.store;
  const uint32_t rank = options_.rank;

  ClusterIndexView* cluster = deps_.cluster_index;
  auto remote_of = [cluster](const std::string& tenant, const std::string& key) {
    return cluster != nullptr ? cluster->Locate(tenant, key) : std::vector<RemoteBlobView>{};
  };

  http_->Get("/query_key", [=](const httplib::Request& req, httplib::Response& res) {
    std::string key;
    if (!Param(req, res, "key", &key)) return;
    const std::string tenant = TenantParam(req);
    Result<ObjectInfo> info = store->Query(rest, {tenant, key});
    const std::vector<RemoteBlobView> remote = remote_of(tenant, key);
    if (!info.ok() && (info.status().code() != Code::kNotFound || remote.empty())) {
      return SendError(res, info.status().ToString());
    }
    SendJson(res, KeyRecord(key, info.ok() ? &*info : nullptr, rank, NowMs(), remote));
  });

  http_->Get("/batch_query_keys", [=](const httplib::Request& req, httplib::Response& res) {
    std::string list;
    if (!Param(req, res, "keys", &list)) return;
    const std::vector<std::string> keys = SplitKeys(list);
    std::vector<std::string_view> views(keys.begin(), keys.end());
    std::vector<Result<ObjectInfo>> infos = store->BatchQuery(rest, TenantParam(req), views);
    Json data = Json::array();
    const int64_t now = NowMs();
    const std::string tenant = TenantParam(req);
    for (size_t i = 0; i < keys.size(); ++i) {
      data.push_back(KeyRecord(keys[i], infos[i].ok() ? &*infos[i] : nullptr, rank, now,
                               remote_of(tenant, keys[i])));
    }
    Json j;
    j["success"] = true;
    j["data"] = data;
    SendJson(res, j);
  });

  http_->Delete("/key", [=](const httplib::Request& req, httplib::Response& res) {
    std::string key;
    if (!Param(req, res, "key", &key)) return;
    if (Status st = store->Remove(rest, {TenantParam(req), key}); !st.ok()) {
      return SendError(res, st.ToString());
    }
    Json j;
    j["success"] = true;
    j["message"] = "key deleted";
    SendJson(res, j);
  });

  http_->Delete("/all_keys", [=](const httplib::Request& req, httplib::Response& res) {
    // Every tenant unless one is named; leased objects are hidden now and freed
    // when their readers release them.
    Result<RemoveAllResult> r = req.has_param("tenant")
                                    ? store->RemoveAll(rest, TenantParam(req), /*force=*/true)
                                    : store->admin().RemoveAllTenants(rest, /*force=*/true);
    if (!r.ok()) return SendError(res, r.status().ToString());
    Json j;
    j["success"] = true;
    j["message"] = "all keys deleted";
    SendJson(res, j);
  });

  http_->Get("/get_all_keys", [=](const httplib::Request& req, httplib::Response& res) {
    Result<std::vector<std::string>> keys = store->ListKeys(rest, TenantParam(req), "", 0);
    if (!keys.ok()) return SendError(res, keys.status().ToString());
    std::string out;
    for (const std::string& k : *keys) out += k + "\n";
    SendText(res, out);
  });
}

void RestServer::CapacityRoutes() {
  // The segment named by the `segment` parameter; sends the error otherwise.
  auto segment_param = [this](const httplib::Request& req, httplib::Response& res,
                              SegmentInfo* out) {
    std::string name;
    if (!Param(req, res, "segment", &name)) return false;
    for (const SegmentInfo& s : Segments()) {
      if (s.name == name) {
        *out = s;
        return true;
      }
    }
    SendError(res, "unknown segment '" + name + "'");
    return false;
  };
  http_->Get("/get_all_segments", [this](const httplib::Request&, httplib::Response& res) {
    std::string out;
    for (const SegmentInfo& s : Segments()) out += s.name + "\n";
    SendText(res, out);
  });

  http_->Get("/query_segment", [=](const httplib::Request& req, httplib::Response& res) {
    SegmentInfo s;
    if (!segment_param(req, res, &s)) return;
    SendJson(res, SegmentRecord(s, "segment"));
  });

  http_->Get("/api/v1/segments/status", [=](const httplib::Request& req, httplib::Response& res) {
    SegmentInfo s;
    if (!segment_param(req, res, &s)) return;
    Json j;
    j["success"] = true;
    j["segment"] = s.name;
    j["status"] = 1;
    j["status_name"] = "OK";
    SendJson(res, j);
  });

  http_->Get("/api/v1/capacity/usage", [this](const httplib::Request&, httplib::Response& res) {
    uint64_t total[kMediumCount] = {}, used[kMediumCount] = {};
    for (const SegmentInfo& s : Segments()) {
      total[static_cast<int>(s.medium)] += s.total_bytes;
      used[static_cast<int>(s.medium)] += s.used_bytes;
    }
    auto usage = [&](Medium m) {
      const int i = static_cast<int>(m);
      Json u;
      u["total_bytes"] = total[i];
      u["used_bytes"] = used[i];
      u["free_bytes"] = total[i] - used[i];
      u["usage_ratio"] = total[i] ? static_cast<double>(used[i]) / total[i] : 0.0;
      return u;
    };
    Json j;
    j["timestamp"] = NowMs();
    j["data_source_ready"] = true;
    j["degraded"] = false;
    j["npu"] = usage(Medium::kHbm);
    j["cpu"] = usage(Medium::kDram);
    SendJson(res, j);
  });

  http_->Get("/api/v1/capacity/segment_remaining",
             [this](const httplib::Request&, httplib::Response& res) {
               Json segs = Json::array();
               for (const SegmentInfo& s : Segments()) {
                 segs.push_back(SegmentRecord(s, "segment_name"));
               }
               Json j;
               j["timestamp"] = NowMs();
               j["data_source_ready"] = true;
               j["degraded"] = false;
               j["segments"] = segs;
               SendJson(res, j);
             });

  DrainControl* drain = deps_.drain;
  if (drain == nullptr) {  // standalone
    auto not_supported = [](const httplib::Request&, httplib::Response& res) {
      SendError(res, "Not supported");
    };
    http_->Post("/api/v1/drain_jobs", not_supported);
    http_->Get("/api/v1/drain_jobs/query", not_supported);
    http_->Post("/api/v1/drain_jobs/cancel", not_supported);
    return;
  }
  // Cluster mode: one-line text summaries (DrainSummary's field order).
  http_->Post("/api/v1/drain_jobs", [drain](const httplib::Request& req, httplib::Response& res) {
    const Json body = Json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (!body.is_object()) return SendError(res, "the body must be a JSON object");
    auto text = [&](const char* name) -> std::string {
      return body.contains(name) && body[name].is_string() ? body[name].get<std::string>() : "";
    };
    for (const auto& [k, v] : body.items()) {
      if ((k != "segment" && k != "node") || !v.is_string()) {
        return SendError(res,
                         "unknown or non-string field '" + k + "' (give \"segment\" or \"node\")");
      }
    }
    Result<std::string> id = drain->Start(text("segment"), text("node"));
    if (!id.ok()) return SendError(res, id.status().message());
    Result<DrainJobView> v = drain->Query(*id);
    if (!v.ok()) return SendError(res, v.status().message());
    SendText(res, DrainSummary(*v));
  });
  http_->Get("/api/v1/drain_jobs/query",
             [drain](const httplib::Request& req, httplib::Response& res) {
               std::string id;
               if (!Param(req, res, "job_id", &id)) return;
               Result<DrainJobView> v = drain->Query(id);
               if (!v.ok()) return SendError(res, v.status().message());
               SendText(res, DrainSummary(*v));
             });
  http_->Post("/api/v1/drain_jobs/cancel",
              [drain](const httplib::Request& req, httplib::Response& res) {
                std::string id;
                if (!Param(req, res, "job_id", &id)) return;
                if (Status st = drain->Cancel(id); !st.ok()) return SendError(res, st.message());
                Result<DrainJobView> v = drain->Query(id);
                if (!v.ok()) return SendError(res, v.status().message());
                SendText(res, DrainSummary(*v));
              });
}

void RestServer::MemoryRoutes() {
  Store* store = deps_.store;
  http_->Post("/memory/evict", [this, store](const httplib::Request& req, httplib::Response& res) {
    ChunkRequest c;
    if (Status st = ParseChunkRequest(req.body, &c); !st.ok()) return SendError(res, st.message());
    if (Status st = store->rules().Tenant(c.tenant); !st.ok()) return SendError(res, st.ToString());
    // What is there now is what will be evicted; the work itself runs behind.
    const size_t n = store->admin().CountReadable(c.tenant, c.keys);
    if (c.has_locations) {
      // One tier down: HBM -> DRAM, DRAM -> SSD, SSD -> gone (DRAM -> gone
      // without SSD).
      Enqueue([store, c] { store->admin().EvictKeys(c.tenant, c.keys); });
    } else {
      Enqueue([store, c, rank = options_.rank] {
        std::vector<std::string_view> views(c.keys.begin(), c.keys.end());
        (void)store->BatchRemove(Caller{0, rank}, c.tenant, views);
      });
    }
    Json j;
    j["status"] = "success";
    j["num_evicted"] = n;
    SendJson(res, j);
  });

  http_->Post("/memory/prefetch", [store](const httplib::Request& req, httplib::Response& res) {
    ChunkRequest c;
    if (Status st = ParseChunkRequest(req.body, &c); !st.ok()) return SendError(res, st.message());
    if (Status st = store->rules().Tenant(c.tenant); !st.ok()) return SendError(res, st.ToString());
    // One tier up. Rewarms of the keys held only on SSD run in the
    // background; copies of DRAM values up into HBM run here (no disk in
    // them). num_chunks counts both (keys at the top or missing need none).
    Json j;
    j["status"] = "prefetch_started";
    j["lookup_id"] = c.lookup_id;
    j["num_chunks"] = store->admin().Prefetch(c.tenant, c.keys);
    SendJson(res, j);
  });
}

void RestServer::StatusRoutes() {
  MetadataStore* meta = deps_.metadata;
  HaStateProvider* ha = deps_.ha;

  http_->Get("/metadata", [meta](const httplib::Request& req, httplib::Response& res) {
    std::string key;
    if (!Param(req, res, "key", &key)) return;
    Result<std::string> v = meta->Get(key);
    if (!v.ok()) return SendError(res, v.status().message());
    SendText(res, *v);
  });
  http_->Put("/metadata", [meta](const httplib::Request& req, httplib::Response& res) {
    std::string key;
    if (!Param(req, res, "key", &key)) return;
    if (Status st = meta->Put(key, req.body); !st.ok()) return SendError(res, st.message());
    SendText(res, "metadata updated");
  });
  http_->Delete("/metadata", [meta](const httplib::Request& req, httplib::Response& res) {
    std::string key;
    if (!Param(req, res, "key", &key)) return;
    if (Status st = meta->Delete(key); !st.ok()) return SendError(res, st.message());
    SendText(res, "metadata deleted");
  });

  http_->Get("/health", [this, ha](const httplib::Request&, httplib::Response& res) {
    const HaState s = ha->Get();
    Json j;
    j["status"] = "ok";
    j["role"] = s.role;
    j["ha_state"] = s.ha_state;
    j["service_ready"] = s.service_ready;
    j["leader_address"] = s.leader_address;
    j["view_version"] = s.view_version;
    // Beyond the contract, and only while a tier is degraded: the contract's
    // body stays exactly its own when all is well.
    if (Json t = TierHealth(); t["ssd"] == "paused" || t["ssd"] == "unavailable") {
      j["tiers"] = std::move(t);
    }
    SendJson(res, j);
  });
  http_->Get("/role", [ha](const httplib::Request&, httplib::Response& res) {
    SendText(res, ha->Get().role);
  });
  http_->Get("/ha_status", [ha](const httplib::Request&, httplib::Response& res) {
    SendText(res, ha->Get().ha_state);
  });
  http_->Get("/leader", [ha](const httplib::Request&, httplib::Response& res) {
    const HaState s = ha->Get();
    Json j;
    j["present"] = s.leader_present;
    j["leader_address"] = s.leader_address;
    j["view_version"] = s.view_version;
    SendJson(res, j);
  });

  ClusterRoutes();

  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderPrometheus(Snapshot()), "text/plain; version=0.0.4");
  });
  http_->Get("/metrics/summary", [this](const httplib::Request&, httplib::Response& res) {
    SendText(res, RenderSummary(Snapshot()));
  });
  http_->Get("/metrics/ptracer", [](const httplib::Request&, httplib::Response& res) {
    SendText(res, FormatTraceTable(Tracer::Global().Snapshot(), TimeText()));
  });
  http_->Get("/api/v1/analysis/alloc_free_latency",
             [](const httplib::Request&, httplib::Response& res) {
               std::vector<TraceSnapshot> rows;
               for (TraceSnapshot& r : Tracer::Global().Snapshot()) {
                 if (r.name == "TP_MMC_META_ALLOC" || r.name == "TP_MMC_META_BATCH_ALLOC" ||
                     r.name == "TP_MMC_META_FREE" || r.name == "TP_MMC_META_REMOVE" ||
                     r.name == "TP_MMC_META_BATCH_REMOVE") {
                   rows.push_back(std::move(r));
                 }
               }
               SendText(res, FormatTraceTable(rows, TimeText()));
             });

  http_->Get("/kv_events/status", [this](const httplib::Request&, httplib::Response& res) {
    events::PublisherStats s;
    if (deps_.publisher != nullptr) {
      s = deps_.publisher->Stats();
    } else {
      s.queue_capacity = options_.events_queue_capacity;
    }
    // The contract's fields (alphabetical, as its example) plus the subscriber
    // guide's skipped_keyless_events.
    Json j;
    j["dropped_events"] = s.dropped_events;
    j["dropped_high_priority_events"] = s.dropped_high_priority_events;
    j["dropped_stored_events"] = s.dropped_stored_events;
    j["enabled"] = s.enabled;
    j["last_sequence"] = s.last_sequence;
    j["published_batches"] = s.published_batches;
    Json by_medium;
    by_medium["dram"] = s.published_by_medium[1];
    by_medium["hbm"] = s.published_by_medium[0];
    by_medium["ssd"] = s.published_by_medium[2];
    by_medium["unknown"] = s.published_by_medium[3];
    j["published_by_medium"] = by_medium;
    Json by_type;
    by_type["cleared"] = s.published_by_type[2];
    by_type["removed"] = s.published_by_type[1];
    by_type["stored"] = s.published_by_type[0];
    j["published_by_type"] = by_type;
    j["published_events"] = s.published_events;
    j["publisher_active"] = s.publisher_active;
    j["queue_capacity"] = s.queue_capacity;
    j["queue_size"] = s.queue_size;
    j["skipped_keyless_events"] = s.skipped_keyless_events;
    j["skipped_unparsed_keys"] = s.skipped_unparsed_keys;
    SendJson(res, j);
  });
}

}  // namespace tierkv
