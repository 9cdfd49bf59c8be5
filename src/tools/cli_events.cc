#include "tools/cli_events.h"

#include <chrono>
#include <cstdio>
#include <msgpack.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace tierkv::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Renders a MessagePack value as JSON (strings escaped; bin as a hex string).
void ToJson(const msgpack::object& o, std::string* out) {
  switch (o.type) {
    case msgpack::type::NIL:
      *out += "null";
      break;
    case msgpack::type::BOOLEAN:
      *out += o.via.boolean ? "true" : "false";
      break;
    case msgpack::type::POSITIVE_INTEGER:
      *out += std::to_string(o.via.u64);
      break;
    case msgpack::type::NEGATIVE_INTEGER:
      *out += std::to_string(o.via.i64);
      break;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      *out += std::to_string(o.via.f64);
      break;
    case msgpack::type::STR: {
      *out += '"';
      for (uint32_t i = 0; i < o.via.str.size; ++i) {
        const auto c = static_cast<unsigned char>(o.via.str.ptr[i]);
        if (c == '"' || c == '\\') {
          *out += '\\';
          *out += static_cast<char>(c);
        } else if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
      }
      *out += '"';
      break;
    }
    case msgpack::type::BIN: {
      *out += "\"0x";
      for (uint32_t i = 0; i < o.via.bin.size; ++i) {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned char>(o.via.bin.ptr[i]));
        *out += buf;
      }
      *out += '"';
      break;
    }
    case msgpack::type::ARRAY:
      *out += '[';
      for (uint32_t i = 0; i < o.via.array.size; ++i) {
        if (i) *out += ',';
        ToJson(o.via.array.ptr[i], out);
      }
      *out += ']';
      break;
    case msgpack::type::MAP:
      *out += '{';
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        if (i) *out += ',';
        ToJson(o.via.map.ptr[i].key, out);
        *out += ':';
        ToJson(o.via.map.ptr[i].val, out);
      }
      *out += '}';
      break;
    default:
      *out += "null";
  }
}

std::string Field(const msgpack::object& ev, const char* name) {
  for (uint32_t i = 0; i < ev.via.map.size; ++i) {
    const msgpack::object& k = ev.via.map.ptr[i].key;
    if (k.type == msgpack::type::STR && std::string_view(k.via.str.ptr, k.via.str.size) == name) {
      const msgpack::object& v = ev.via.map.ptr[i].val;
      if (v.type == msgpack::type::STR) return std::string(v.via.str.ptr, v.via.str.size);
      if (v.type == msgpack::type::NIL) return "-";
      std::string s;
      ToJson(v, &s);
      return s;
    }
  }
  return "";
}

}  // namespace

int RunEvents(const EventsOptions& opt) {
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  try {
    sub.set(zmq::sockopt::subscribe, "");
    sub.set(zmq::sockopt::rcvtimeo, 200);
    sub.connect(opt.endpoint);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "tierkv: cannot subscribe to %s: %s\n", opt.endpoint.c_str(), e.what());
    return 3;
  }
  const auto start = Clock::now();
  auto last_report = start;
  uint64_t events = 0, messages = 0, gaps = 0, lost = 0, restarts = 0, since_report = 0;
  uint64_t last_seq = 0;
  bool have_seq = false;
  for (;;) {
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if ((opt.count && events >= opt.count) || (opt.seconds > 0 && elapsed >= opt.seconds)) break;
    if (opt.stats_every > 0 &&
        std::chrono::duration<double>(now - last_report).count() >= opt.stats_every) {
      const double window = std::chrono::duration<double>(now - last_report).count();
      std::fprintf(
          stderr,
          "[events] seq=%llu events=%llu rate=%.0f/s gaps=%llu lost_msgs=%llu restarts=%llu\n",
          static_cast<unsigned long long>(last_seq), static_cast<unsigned long long>(events),
          since_report / window, static_cast<unsigned long long>(gaps),
          static_cast<unsigned long long>(lost), static_cast<unsigned long long>(restarts));
      last_report = now;
      since_report = 0;
    }
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(sub, std::back_inserter(frames))) continue;
    if (frames.size() != 3 || frames[1].size() != 8) {
      std::fprintf(stderr, "tierkv: malformed message (%zu frames)\n", frames.size());
      continue;
    }
    uint64_t seq = 0;
    for (int i = 0; i < 8; ++i) seq = (seq << 8) | static_cast<const uint8_t*>(frames[1].data())[i];
    if (have_seq && seq <= last_seq) {
      ++restarts;
      std::fprintf(stderr, "[events] sequence went back to %llu: publisher restarted, reconcile\n",
                   static_cast<unsigned long long>(seq));
    } else if (have_seq && seq != last_seq + 1) {
      ++gaps;
      lost += seq - last_seq - 1;
      std::fprintf(stderr, "[events] gap: %llu message(s) lost before %llu\n",
                   static_cast<unsigned long long>(seq - last_seq - 1),
                   static_cast<unsigned long long>(seq));
    }
    have_seq = true;
    last_seq = seq;
    ++messages;
    msgpack::object_handle h;
    try {
      h = msgpack::unpack(static_cast<const char*>(frames[2].data()), frames[2].size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tierkv: undecodable payload at %llu: %s\n",
                   static_cast<unsigned long long>(seq), e.what());
      continue;
    }
    const msgpack::object& payload = h.get();
    if (payload.type != msgpack::type::ARRAY || payload.via.array.size != 3) continue;
    const msgpack::object& list = payload.via.array.ptr[1];
    for (uint32_t i = 0; i < list.via.array.size; ++i) {
      const msgpack::object& ev = list.via.array.ptr[i];
      if (opt.json) {
        std::string line = "{\"sequence\":" + std::to_string(seq) + ",\"event\":";
        ToJson(ev, &line);
        line += "}";
        std::printf("%s\n", line.c_str());
      } else {
        std::printf("seq=%llu id=%s %-7s tenant=%s key=%s medium=%s backend=%s\n",
                    static_cast<unsigned long long>(seq), Field(ev, "event_id").c_str(),
                    Field(ev, "event_type").c_str(), Field(ev, "tenant_id").c_str(),
                    Field(ev, "object_key").c_str(), Field(ev, "medium").c_str(),
                    Field(ev, "backend_id").c_str());
      }
      ++events;
      ++since_report;
      if (opt.count && events >= opt.count) break;
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace tierkv::cli
