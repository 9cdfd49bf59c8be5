#include "cluster/peer_rpc.h"

namespace tierkv {

Result<std::shared_ptr<const PeerCredentials>> LoadPeerCredentials(
    const transfer::TlsFiles& files) {
  if (!files.enabled()) return std::shared_ptr<const PeerCredentials>();
  Result<std::string> cert = transfer::ReadPem(files.cert, "--peer-tls-cert");
  if (!cert.ok()) return cert.status();
  Result<std::string> key = transfer::ReadPem(files.key, "--peer-tls-key");
  if (!key.ok()) return key.status();
  Result<std::string> ca = transfer::ReadPem(files.ca, "--peer-tls-ca");
  if (!ca.ok()) return ca.status();
  auto creds = std::make_shared<PeerCredentials>();
  grpc::SslServerCredentialsOptions so(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  so.pem_root_certs = *ca;
  so.pem_key_cert_pairs.push_back({*key, *cert});
  creds->server = grpc::SslServerCredentials(so);
  grpc::SslCredentialsOptions co;
  co.pem_root_certs = *ca;
  co.pem_private_key = *key;
  co.pem_cert_chain = *cert;
  creds->channel = grpc::SslCredentials(co);
  return std::shared_ptr<const PeerCredentials>(std::move(creds));
}

std::shared_ptr<grpc::Channel> PeerChannel(const std::string& endpoint,
                                           const PeerCredentials* creds) {
  if (creds != nullptr && creds->dial) return creds->dial(endpoint);
  return grpc::CreateChannel(
      endpoint, creds && creds->channel ? creds->channel : grpc::InsecureChannelCredentials());
}

std::shared_ptr<grpc::ServerCredentials> PeerServerCredentials(const PeerCredentials* creds) {
  return creds && creds->server ? creds->server : grpc::InsecureServerCredentials();
}

void SetItemStatus(peer::GrantedItem* item, const Status& st) {
  item->set_code(static_cast<uint32_t>(st.code()));
  if (!st.ok()) item->set_message(st.message());
}

Status ItemStatus(const peer::GrantedItem& item) {
  if (item.code() == 0) return Status::Ok();
  return Status(item.code() <= kMaxCode ? static_cast<Code>(item.code()) : Code::kInternal,
                item.message());
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
