// The Authorize call as both planes serve it: peer gRPC (Peer/Authorize) and
// the data channel's AUTHORIZE (docs/cluster.md, "The data channel"), which
// carries the same tierkv.peer.AuthorizeRequest and AuthorizeResponse
// encoded in its frames.
//
// Thread-safety: thread-safe (GrantTable is).
#ifndef TIERKV_CLUSTER_GRANT_SERVICE_H_
#define TIERKV_CLUSTER_GRANT_SERVICE_H_

#include <optional>
#include <string>
#include <string_view>

#include "cluster/grants.h"
#include "tierkv/status.h"
#include "transfer/transport.h"

namespace tierkv {

namespace peer {
class AuthorizeRequest;
class AuthorizeResponse;
}  // namespace peer

// Releases the request's release_tickets, then authorizes its items; fills
// `out` (ticket, grant deadline, one answer per item). Errors: those of
// GrantTable::Authorize for the whole call. With `may_block` false, RETRY
// when deciding needs a wait (nothing decided; the releases are done and
// doing them again is harmless).
Status ServeAuthorize(GrantTable& grants, const peer::AuthorizeRequest& req,
                      peer::AuthorizeResponse* out, bool may_block = true);

// The owner's side of the data channel: READs open GrantTable's grants, and
// AUTHORIZE decodes the request, serves it as above and encodes the answer.
class DataChannelGrants final : public transfer::GrantSource {
 public:
  // `grants` is not owned and must outlive this.
  explicit DataChannelGrants(GrantTable* grants) : grants_(grants) {}
  Result<transfer::GrantSpan> Open(uint64_t ticket, uint32_t item, uint64_t generation) override {
    return grants_->Open(ticket, item, generation);
  }
  // Errors: INVALID_ARGUMENT (bytes that are not an AuthorizeRequest, or one
  // for another ticket than the frame's), or the refusal of the whole call.
  Result<std::string> Authorize(uint64_t ticket, std::string_view request) override;
  // The same, decided at once unless that needs a wait (an item held only on
  // SSD, the budget wait): then nothing.
  std::optional<Result<std::string>> TryAuthorize(uint64_t ticket,
                                                  std::string_view request) override;

 private:
  Result<std::string> Decide(uint64_t ticket, std::string_view request, bool may_block);

  GrantTable* const grants_;
};

}  // namespace tierkv

#endif  // TIERKV_CLUSTER_GRANT_SERVICE_H_
