// tierkv::Client's zero-copy reads: PIN holds a value in place in the shared
// pool until UNPIN or the end of the connection.
#include "client/client_impl.h"

namespace tierkv {

Result<PinnedValue> Client::Pin(std::string_view key, std::string_view tenant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Connection& conn = impl_->conn;
  if (!conn.shared_memory()) {
    return Status(Code::kNotSupported,
                  "pinned (zero-copy) reads need the shared pool: connect over the Unix socket");
  }
  Writer w = impl_->Begin();
  proto::KeyRequest{tenant, key}.Encode(w);
  if (Status st = impl_->Call(Opcode::kPin); !st.ok()) return st;
  Reader r(impl_->reply);
  const proto::LeaseReply pin = proto::DecodeLeaseReply(r);
  // The call may have reconnected: the pool is the one mapped now.
  if (!r.done() || pin.offset + pin.size > conn.pool_size() || pin.size == 0) {
    return Status(Code::kProtocolError, "malformed pin reply");
  }
  PinnedValue v;
  v.pin_id = pin.lease_id;
  v.data = conn.pool() + pin.offset;
  v.size = pin.size;
  v.incarnation = conn.incarnation();
  v.mapping = conn.pool_mapping();
  return v;
}

Status Client::Unpin(const PinnedValue& value) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (value.incarnation != impl_->conn.incarnation()) return Status::Ok();  // ended with it
  Writer w = impl_->Begin();
  proto::IdRequest{value.pin_id}.Encode(w);
  return impl_->conn.PostLater(Opcode::kUnpin, impl_->body);
}

bool Client::PinHeld(const PinnedValue& value) const {
  return value.mapping != nullptr && value.incarnation == impl_->conn.incarnation();
}

}  // namespace tierkv
