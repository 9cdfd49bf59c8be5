#include "cluster/grant_service.h"

#include <chrono>
#include <optional>
#include <vector>

#include "cluster/peer_rpc.h"
#include "common/tracer.h"
#include "peer.pb.h"

namespace tierkv {

Status ServeAuthorize(GrantTable& grants, const peer::AuthorizeRequest& req,
                      peer::AuthorizeResponse* out, bool may_block) {
  static Tracepoint* const tp = Tracer::Global().Get("TP_PEER_AUTHORIZE");
  // A decision that may wait is traced as it starts (it shows as ON_FLY while
  // it waits); one that never waits only once it is made, so an attempt that
  // gave way to a wait is not counted.
  std::optional<TraceScope> waiting;
  if (may_block) waiting.emplace(tp);
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t t : req.release_tickets()) grants.Release(req.requester_uuid(), t);
  std::vector<GrantRequestItem> items;
  items.reserve(req.items_size());
  for (const peer::GrantItem& g : req.items()) {
    items.push_back({g.tenant(), g.key(), g.generation()});
  }
  Result<std::vector<GrantAnswer>> answers =
      grants.Authorize(req.requester_node(), req.requester_uuid(), req.expect_owner_uuid(),
                       req.ticket(), items, may_block);
  if (waiting) {
    waiting->End(answers.ok());
  } else if (answers.status().code() != Code::kRetry) {
    tp->Begin();
    tp->End(answers.ok(),
            static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now() - start)
                                      .count()));
  }
  if (!answers.ok()) return answers.status();
  out->set_ticket(req.ticket());
  out->set_expires_in_ms(static_cast<uint64_t>(grants.grant_timeout_ms()));
  out->set_sequence(grants.ChangeSequence());
  for (const GrantAnswer& a : *answers) {
    peer::GrantedItem* g = out->add_items();
    SetItemStatus(g, a.status);
    g->set_size(a.size);
    g->set_generation(a.generation);
  }
  return Status::Ok();
}

Result<std::string> DataChannelGrants::Authorize(uint64_t ticket, std::string_view request) {
  return Decide(ticket, request, true);
}

std::optional<Result<std::string>> DataChannelGrants::TryAuthorize(uint64_t ticket,
                                                                   std::string_view request) {
  Result<std::string> decided = Decide(ticket, request, false);
  if (decided.status().code() == Code::kRetry) return std::nullopt;
  return decided;
}

Result<std::string> DataChannelGrants::Decide(uint64_t ticket, std::string_view request,
                                              bool may_block) {
  peer::AuthorizeRequest req;
  if (!req.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
    return InvalidArgument("the AUTHORIZE payload is not an encoded tierkv.peer.AuthorizeRequest");
  }
  if (req.ticket() != ticket) {
    return InvalidArgument("the AUTHORIZE frame is for ticket " + std::to_string(ticket) +
                           ", its payload for " + std::to_string(req.ticket()));
  }
  peer::AuthorizeResponse out;
  if (Status st = ServeAuthorize(*grants_, req, &out, may_block); !st.ok()) return st;
  return out.SerializeAsString();
}

}  // namespace tierkv
