// Peer mTLS: managers with certificates from the cluster's CA stream their
// inventories and read each other's objects; a manager with a certificate from
// another CA, and plaintext clients, get nothing from them.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster_util.h"
#include "peer.grpc.pb.h"
#include "pki.h"

namespace tierkv {
namespace {

using namespace cluster_test;
using testing::Pki;
using testing::ScrapeMetric;
using testing::WaitFor;

std::string DataEndpointOf(const ManagerProcess& m, const std::string& node) {
  Json j = GetJson(m, "/cluster/members");
  for (const auto& e : j["members"]) {
    if (e["node_id"] == node) return e["data_endpoint"].get<std::string>();
  }
  return "";
}

// Sends one plaintext READ request to `endpoint`; true when a reply came back.
bool PlaintextReadAnswered(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &addr.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool answered = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    uint8_t req[48] = {'T', 'K', 'V', 'D', 1, 0, 1, 0, 1};
    if (write(fd, req, sizeof(req)) == static_cast<ssize_t>(sizeof(req))) {
      uint8_t head[24];
      answered = read(fd, head, sizeof(head)) > 0 && std::memcmp(head, "TKVR", 4) == 0;
    }
  }
  close(fd);
  return answered;
}

TEST(PeerTls, OnlyPeersWithTheClustersCaGetInventoriesAndBytes) {
  Pki pki;
  ASSERT_TRUE(pki.Ca("ca"));
  ASSERT_TRUE(pki.Ca("other-ca"));
  ASSERT_TRUE(pki.Cert("a", "ca"));
  ASSERT_TRUE(pki.Cert("b", "ca"));
  ASSERT_TRUE(pki.Cert("rogue", "other-ca"));
  EtcdCluster etcd(1);
  const std::string cluster = UniqueCluster();
  Node a = StartNode(etcd.endpoints(), cluster, "a", pki.Flags("a", "ca"));
  Node b = StartNode(etcd.endpoints(), cluster, "b", pki.Flags("b", "ca"));
  // The start-up output says the peer plane is on mutual TLS.
  EXPECT_NE(a.proc->startup_output().find("peer api on " + a.addr + " (mutual TLS)\n"),
            std::string::npos)
      << a.proc->startup_output();
  auto ca = Client::Connect(a.proc->uds());
  ASSERT_TRUE(ca.ok());
  const std::string value(300000, 'm');
  ASSERT_TRUE((*ca)->Put("secret", value).ok());
  // Accepted: the inventory stream and the READ run over mutual TLS.
  ASSERT_TRUE(
      WaitFor([&] { return GetJson(*b.proc, "/cache/metadata")["index"]["entries"] == 1; }));
  auto cb = Client::Connect(b.proc->uds());
  ASSERT_TRUE(cb.ok());
  Result<std::string> got = (*cb)->Get("secret");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == value);
  // b keeps its TLS data connections to a between reads (checked before each
  // reuse: a kept TLS connection may hold nothing the owner sent unasked).
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*ca)->Put("more" + std::to_string(i), std::string(5000, 'a' + i)).ok());
  }
  ASSERT_TRUE(
      WaitFor([&] { return GetJson(*b.proc, "/cache/metadata")["index"]["entries"] == 11; }));
  const int64_t opened =
      ScrapeMetric(*a.proc, "tierkv_data_connections_total{result=\"accepted\"}");
  for (int i = 0; i < 10; ++i) {
    Result<std::string> more = (*cb)->Get("more" + std::to_string(i));
    ASSERT_TRUE(more.ok()) << i << ": " << more.status().ToString();
    EXPECT_EQ(*more, std::string(5000, 'a' + i));
  }
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_data_connections_total{result=\"accepted\"}"), opened);

  // Refused: a manager whose certificate another CA signed sees the members
  // in etcd but gets no inventory and no bytes.
  Node r = StartNode(etcd.endpoints(), cluster, "rogue", pki.Flags("rogue", "other-ca"));
  ASSERT_TRUE(WaitFor([&] { return MemberIds(*r.proc).size() == 3; }));
  EXPECT_TRUE(WaitFor(
      [&] { return ScrapeMetric(*r.proc, "tierkv_inventory_requester_failures_total") >= 2; }));
  EXPECT_EQ(GetJson(*r.proc, "/cache/metadata")["index"]["entries"], 0);
  auto cr = Client::Connect(r.proc->uds());
  ASSERT_TRUE(cr.ok());
  EXPECT_EQ((*cr)->Get("secret").status().code(), Code::kNotFound);
  // Refused: plaintext peer gRPC (Identify, Authorize) and a plaintext READ.
  auto stub = peer::Peer::NewStub(grpc::CreateChannel(a.addr, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    peer::IdentifyResponse resp;
    EXPECT_FALSE(stub->Identify(&ctx, peer::IdentifyRequest(), &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    peer::AuthorizeRequest req;
    req.set_ticket(1);
    peer::AuthorizeResponse resp;
    EXPECT_FALSE(stub->Authorize(&ctx, req, &resp).ok());
  }
  const std::string data = DataEndpointOf(*b.proc, "a");
  ASSERT_FALSE(data.empty());
  EXPECT_FALSE(PlaintextReadAnswered(data));
  EXPECT_GE(ScrapeMetric(*a.proc, "tierkv_data_connections_total{result=\"refused\"}"), 1);
  EXPECT_EQ(ScrapeMetric(*a.proc, "tierkv_grants_given_total"), 11);  // b's only
}

TEST(PeerTls, TlsFilesThatCannotBeReadStopTheStart) {
  EtcdCluster etcd(1);
  std::string err;
  EXPECT_EQ(testing::RunServerExpectingFailure(
                NodeArgs(etcd.endpoints(), UniqueCluster(), "a",
                         "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()),
                         {"--peer-tls-cert", "/nonexistent/a.crt", "--peer-tls-key",
                          "/nonexistent/a.key", "--peer-tls-ca", "/nonexistent/ca.crt",
                          "--uds-path", "/tmp/tierkv-tls-" + std::to_string(getpid()) + ".sock",
                          "--listen", "", "--metrics-url", "http://127.0.0.1:0"}),
                &err),
            2);
  EXPECT_NE(err.find("cannot read --peer-tls-cert /nonexistent/a.crt"), std::string::npos) << err;
}

}  // namespace
}  // namespace tierkv
