#include "cluster/peer_rpc.h"

namespace tierkv {

std::shared_ptr<grpc::Channel> PeerChannel(const std::string& endpoint) {
  return grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
}

grpc::Status ToGrpc(const Status& st) {
  switch (st.code()) {
    case Code::kOk:
      return grpc::Status::OK;
    case Code::kNotFound:
      return grpc::Status(grpc::StatusCode::NOT_FOUND, st.message());
    case Code::kInvalidArgument:
    case Code::kTooLarge:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, st.message());
    case Code::kNoSpace:
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, st.message());
    case Code::kUnavailable:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, st.message());
    default:
      return grpc::Status(grpc::StatusCode::INTERNAL, st.ToString());
  }
}

Status FromGrpc(const grpc::Status& st) {
  switch (st.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::NOT_FOUND:
      return NotFound(st.error_message());
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidArgument(st.error_message());
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status(Code::kNoSpace, st.error_message());
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status(Code::kInternal, "peer: " + st.error_message());
    default:
      return Status(Code::kUnavailable, "peer unreachable: " + st.error_message());
  }
}

}  // namespace tierkv
