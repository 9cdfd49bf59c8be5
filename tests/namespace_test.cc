// Namespaces: declared at connect, validated there, recorded with every object
// a client puts, shown by query (client, REST /query_key, CLI stat).
#include <gtest/gtest.h>
#include <httplib.h>

#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;

TEST(Namespace, DerivationIsCanonicalAndStable) {
  // Key order does not matter; values and keys do.
  const std::string a = DeriveNamespace({{"model", "llama-3-8b"}, {"dtype", "bf16"}});
  const std::string b = DeriveNamespace({{"dtype", "bf16"}, {"model", "llama-3-8b"}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, DeriveNamespace({{"model", "llama-3-8b"}, {"dtype", "fp8"}}));
  EXPECT_TRUE(ValidNamespace(a));
  // sha256('{"dtype":"bf16","model":"llama-3-8b"}') and sha256('{}'), as hashlib gives them.
  EXPECT_EQ(a, "tierkv:v1:917bc6fd6244d933bbf8a8778c5eeee208ce1d886e552ce542e3412f381ca59a");
  EXPECT_EQ(DeriveNamespace({}),
            "tierkv:v1:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
}

TEST(Namespace, ObjectsRecordTheNamespaceOfThePutThatCreatedThem) {
  ManagerProcess m;
  const std::string ns = DeriveNamespace({{"model", "m"}});
  ClientOptions o;
  o.name_space = ns;
  auto engine = Client::Connect(m.uds(), o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto plain = Client::Connect(m.tcp());
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*engine)->Put("with", "v").ok());
  ASSERT_TRUE((*plain)->Put("without", "v").ok());
  EXPECT_EQ((*plain)->Query("with")->name_space, ns);  // whoever asks
  EXPECT_EQ((*engine)->Query("without")->name_space, "");
  // An upsert by another client re-creates the object in its namespace.
  ASSERT_TRUE((*plain)->Upsert("with", "v2").ok());
  EXPECT_EQ((*engine)->Query("with")->name_space, "");
  ASSERT_TRUE((*engine)->Upsert("without", "v2").ok());
  EXPECT_EQ((*plain)->Query("without")->name_space, ns);
  // REST /query_key shows it for an object that has one, and keeps the
  // contract's exact fields for one that has none.
  ASSERT_TRUE((*plain)->Put("none", "v").ok());
  httplib::Client http(m.rest());
  auto with = http.Get("/query_key?key=without");
  ASSERT_TRUE(with);
  EXPECT_NE(with->body.find("\"namespace\":\"" + ns + "\""), std::string::npos) << with->body;
  auto none = http.Get("/query_key?key=none");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->body.find("namespace"), std::string::npos) << none->body;
  // The CLI's stat prints it.
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({TIERKV_CLI_BIN, "-a", m.uds(), "stat", "without"}, "", &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("namespace: " + ns), std::string::npos) << out;
}

TEST(Namespace, AMalformedNamespaceIsRefusedAtConnect) {
  ManagerProcess m;
  for (const std::string& bad :
       {"tierkv:v1:" + std::string(63, 'a'), "tierkv:v1:" + std::string(64, 'A'),
        "tierkv:v2:" + std::string(64, 'a'), std::string("model-x"), std::string(10000, 'x')}) {
    ClientOptions o;
    o.name_space = bad;
    auto c = Client::Connect(m.uds(), o);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(c.status().message().find("namespace"), std::string::npos);
  }
  auto fine = Client::Connect(m.uds());
  ASSERT_TRUE(fine.ok());
  EXPECT_TRUE((*fine)->Put("k", "v").ok());
}

}  // namespace
}  // namespace tierkv
