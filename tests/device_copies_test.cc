// Puts from and gets into GPU memory (ClientOptions::device_copies) against a
// real manager, on the "host" stand-in devices (device addresses are host
// addresses): single, batch and scatter/gather over the Unix socket and TCP,
// every byte compared; a device copy that fails stores nothing and gives the
// grant back; a client without device copies refuses.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "client/client_test_peer.h"
#include "client_util.h"
#include "device/host_device.h"
#include "manager_process.h"
#include "tierkv/client.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;
using testing::RandomBytes;

std::unique_ptr<Client> DeviceClient(const std::string& address) {
  ClientOptions o;
  o.device_copies = "host";
  return testing::ConnectWith(address, o);
}

DeviceRegion Of(std::string& s) { return {reinterpret_cast<uint64_t>(s.data()), s.size()}; }

// A device of the stand-in runtime whose copies fail.
class FailingDevice final : public Device {
 public:
  int ordinal() const override { return 0; }
  std::string name() const override { return "failing"; }
  uint64_t total_bytes() const override { return 0; }
  Result<DevicePtr> Allocate(uint64_t) override { return Status(Code::kNoSpace, "none"); }
  Status Free(DevicePtr) override { return Status::Ok(); }
  Status CopyToDevice(DevicePtr, const void*, uint64_t) override {
    return Status(Code::kIoError, "cuMemcpyHtoD: CUDA_ERROR_ILLEGAL_ADDRESS (injected)");
  }
  Status CopyToHost(void*, DevicePtr, uint64_t) override {
    return Status(Code::kIoError, "cuMemcpyDtoH: CUDA_ERROR_ILLEGAL_ADDRESS (injected)");
  }
  Status CopyOnDevice(DevicePtr, DevicePtr, uint64_t) override { return Status::Ok(); }
  Result<IpcHandle> Export(DevicePtr) override { return Status(Code::kNotSupported, "no"); }
  Result<DevicePtr> Import(const IpcHandle&) override { return Status(Code::kNotSupported, "no"); }
  Status CloseImport(DevicePtr) override { return Status::Ok(); }
};

class DeviceCopies : public ::testing::TestWithParam<bool> {
 protected:
  std::string Address() const { return GetParam() ? m_.uds() : m_.tcp(); }
  ManagerProcess m_{{"--dram-size", "64MiB"}};
};

TEST_P(DeviceCopies, SingleBatchAndScatterGatherRoundTripEveryByte) {
  auto c = DeviceClient(Address());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->shared_memory(), GetParam());
  // One region.
  std::string src = RandomBytes(1 << 20, 1);
  DeviceRegion one[] = {Of(src)};
  ASSERT_TRUE(c->PutFromDevice("one", one).ok());
  std::string dst(1 << 20, '\0');
  DeviceRegion into[] = {Of(dst)};
  auto got = c->GetIntoDevice("one", into);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, src.size());
  EXPECT_TRUE(dst == src);
  // What a device put stored is what a host get reads.
  EXPECT_TRUE(*c->Get("one") == src);

  // Scatter/gather, in a batch with a miss and a size mismatch.
  std::vector<std::string> layers = {RandomBytes(4096, 2), RandomBytes(100, 3),
                                     RandomBytes(65536, 4)};
  std::vector<DeviceRegion> parts;
  for (auto& l : layers) parts.push_back(Of(l));
  std::string small = RandomBytes(10, 5);
  DeviceRegion small_part[] = {Of(small)};
  DevicePutItem puts[] = {{"page", parts, "layer-group"}, {"small", small_part, {}}};
  for (const Status& st : c->BatchPutFromDevice(puts)) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c->BatchPutFromDevice(puts)[0].code(), Code::kDuplicated);

  std::vector<std::string> out = {std::string(4096, 'x'), std::string(100, 'x'),
                                  std::string(65536, 'x')};
  std::vector<DeviceRegion> out_parts;
  for (auto& o : out) out_parts.push_back(Of(o));
  std::string wrong(11, 'w');
  DeviceRegion wrong_part[] = {Of(wrong)};
  std::string absent(8, 'a');
  DeviceRegion absent_part[] = {Of(absent)};
  DeviceGetItem gets[] = {{"page", out_parts}, {"small", wrong_part}, {"absent", absent_part}};
  auto res = c->BatchGetIntoDevice(gets);
  ASSERT_TRUE(res[0].ok()) << res[0].status().ToString();
  EXPECT_EQ(*res[0], 4096u + 100u + 65536u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(out[i] == layers[i]) << i;
  EXPECT_EQ(res[1].code(), Code::kInvalidArgument);
  EXPECT_EQ(wrong, std::string(11, 'w'));  // nothing copied
  EXPECT_EQ(res[2].code(), Code::kNotFound);
  EXPECT_EQ(absent, std::string(8, 'a'));
  // Upsert from device memory replaces.
  ASSERT_TRUE(c->PutFromDevice("small", one, {}, /*upsert=*/true).ok());
  EXPECT_EQ(c->Query("small")->size, src.size());
}

TEST_P(DeviceCopies, AFailedDeviceCopyStoresNothingAndTheKeyStaysFree) {
  auto c = DeviceClient(Address());
  ASSERT_TRUE(c);
  std::string src = RandomBytes(70000, 7);
  DeviceRegion one[] = {Of(src)};
  ASSERT_TRUE(c->PutFromDevice("stored", one).ok());
  ClientTestPeer::SetDevice(*c, std::make_unique<FailingDevice>());
  Status put = c->PutFromDevice("failed", one);
  EXPECT_EQ(put.code(), Code::kIoError);
  EXPECT_NE(put.message().find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << put.ToString();
  std::string dst(70000, 'z');
  DeviceRegion into[] = {Of(dst)};
  auto got = c->GetIntoDevice("stored", into);
  EXPECT_EQ(got.code(), Code::kIoError);
  // Nothing half-stored; the key can be put by anyone at once.
  auto other = DeviceClient(Address());
  EXPECT_EQ(other->Exist("failed").code(), Code::kNotFound);
  EXPECT_TRUE(other->PutFromDevice("failed", one).ok());
  EXPECT_TRUE(*other->Get("failed") == src);
}

INSTANTIATE_TEST_SUITE_P(UnixAndTcp, DeviceCopies, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Unix" : "Tcp"; });

TEST(DeviceCopiesOptions, RefusedWithoutDeviceCopiesAndForAnUnknownKind) {
  ManagerProcess m({"--dram-size", "64MiB"});
  auto plain = testing::ConnectWith(m.uds(), {});
  ASSERT_TRUE(plain);
  std::string s = "abc";
  DeviceRegion one[] = {Of(s)};
  EXPECT_EQ(plain->PutFromDevice("k", one).code(), Code::kNotSupported);
  EXPECT_EQ(plain->GetIntoDevice("k", one).code(), Code::kNotSupported);
  ClientOptions o;
  o.device_copies = "opencl";
  EXPECT_EQ(Client::Connect(m.uds(), o).status().code(), Code::kInvalidArgument);
  o.device_copies = "cuda";
  o.cuda_library = "/nonexistent/libcuda.so.1";
  auto cuda = Client::Connect(m.uds(), o);
  EXPECT_FALSE(cuda.ok());
  EXPECT_NE(cuda.status().message().find("/nonexistent/libcuda.so.1"), std::string::npos)
      << cuda.status().ToString();
}

// With a manager that has an HBM tier (stand-in devices): the client maps
// its pools at connect, device puts go GPU to GPU into HBM, device gets of
// values in HBM copy GPU to GPU without a copy into DRAM.
class DeviceCopiesWithHbm : public ::testing::Test {
 protected:
  uint32_t Media(Client& c, const std::string& key) {
    auto q = c.Query(key);
    return q.ok() ? q->media : 0;
  }
  ManagerProcess m_{{"--dram-size", "64MiB", "--hbm-backend", "host", "--hbm-devices", "0,1",
                     "--hbm-size", "4MiB"}};
  static constexpr uint32_t kHbm = MediumBit(Medium::kHbm);
  static constexpr uint32_t kDram = MediumBit(Medium::kDram);
};

TEST_F(DeviceCopiesWithHbm, PutsAndGetsGoGpuToGpuThroughThePools) {
  auto writer = DeviceClient(m_.uds());
  auto reader = DeviceClient(m_.uds());
  auto host = testing::ConnectWith(m_.uds(), {});
  ASSERT_TRUE(writer && reader && host);
  std::vector<std::string> layers = {RandomBytes(300000, 1), RandomBytes(4096, 2)};
  std::vector<DeviceRegion> parts = {Of(layers[0]), Of(layers[1])};
  ASSERT_TRUE(writer->PutFromDevice("page", parts).ok());
  EXPECT_EQ(Media(*host, "page"), kHbm);  // into HBM, no DRAM used
  // Another client reads it GPU to GPU: the value stays where it is.
  std::vector<std::string> out = {std::string(300000, 'x'), std::string(4096, 'x')};
  std::vector<DeviceRegion> out_parts = {Of(out[0]), Of(out[1])};
  auto got = reader->GetIntoDevice("page", out_parts);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(out == layers);
  EXPECT_EQ(Media(*host, "page"), kHbm);
  // A host client's get copies it down into DRAM.
  auto v = host->Get("page");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(*v == layers[0] + layers[1]);
  EXPECT_EQ(Media(*host, "page"), kHbm | kDram);
  // A value in DRAM only is read host to device; a batch mixes both.
  ASSERT_TRUE(host->Put("dram", RandomBytes(5000, 3)).ok());
  std::string a(5000, 'a');
  std::string b(304096, 'b');
  DeviceRegion a_part[] = {Of(a)};
  DeviceRegion b_part[] = {Of(b)};
  DeviceGetItem gets[] = {{"dram", a_part}, {"page", b_part}, {"absent", a_part}};
  auto res = reader->BatchGetIntoDevice(gets);
  ASSERT_TRUE(res[0].ok() && res[1].ok());
  EXPECT_TRUE(a == RandomBytes(5000, 3));
  EXPECT_TRUE(b == layers[0] + layers[1]);
  EXPECT_EQ(res[2].code(), Code::kNotFound);
  // Spread over both GPUs' pools: each put goes to the pool with most room.
  for (int i = 0; i < 6; ++i) {
    std::string value = RandomBytes(512 * 1024, 10 + i);
    DeviceRegion one[] = {Of(value)};
    ASSERT_TRUE(writer->PutFromDevice("spread/" + std::to_string(i), one).ok()) << i;
  }
  for (int i = 0; i < 6; ++i) {
    std::string back(512 * 1024, '\0');
    DeviceRegion one[] = {Of(back)};
    ASSERT_TRUE(reader->GetIntoDevice("spread/" + std::to_string(i), one).ok()) << i;
    EXPECT_TRUE(back == RandomBytes(512 * 1024, 10 + i)) << i;
  }
}

TEST_F(DeviceCopiesWithHbm, HbmFullOrNotWantedPutsGoToDram) {
  ClientOptions o;
  o.device_copies = "host";
  o.device_puts_in_hbm = false;
  auto to_dram = testing::ConnectWith(m_.uds(), o);
  auto c = DeviceClient(m_.uds());
  ASSERT_TRUE(to_dram && c);
  std::string value = RandomBytes(100000, 4);
  DeviceRegion one[] = {Of(value)};
  ASSERT_TRUE(to_dram->PutFromDevice("dram", one).ok());
  EXPECT_EQ(Media(*c, "dram"), kDram);
  // Larger than a pool: DRAM.
  std::string big = RandomBytes(5 << 20, 5);
  DeviceRegion big_part[] = {Of(big)};
  ASSERT_TRUE(c->PutFromDevice("big", big_part).ok());
  EXPECT_EQ(Media(*c, "big"), kDram);
  std::string back(5 << 20, '\0');
  DeviceRegion back_part[] = {Of(back)};
  ASSERT_TRUE(c->GetIntoDevice("big", back_part).ok());
  EXPECT_TRUE(back == big);
  // Over TCP no pool is mapped: device puts go to DRAM.
  auto tcp = DeviceClient(m_.tcp());
  ASSERT_TRUE(tcp->PutFromDevice("tcp", one).ok());
  EXPECT_EQ(Media(*c, "tcp"), kDram);
}

// A manager that restarts has new pools: the client maps them on its next
// connection and never writes through the old mapping.
TEST(DeviceCopiesRestart, TheClientMapsTheNewManagersPools) {
  const std::string path = "/tmp/tierkv-hbm-reconnect-" + std::to_string(getpid()) + ".sock";
  testing::UnlinkAtExit unlink_at_end(path);
  const std::vector<std::string> args = {"--uds-path",    path,   "--hbm-backend", "host",
                                         "--hbm-devices", "0",    "--hbm-size",    "4MiB",
                                         "--dram-size",   "64MiB"};
  auto m = std::make_unique<ManagerProcess>(args);
  auto c = DeviceClient(m->uds());
  ASSERT_TRUE(c);
  std::string first = RandomBytes(100000, 1);
  DeviceRegion one[] = {Of(first)};
  ASSERT_TRUE(c->PutFromDevice("a", one).ok());
  EXPECT_EQ(c->Query("a")->media, MediumBit(Medium::kHbm));
  EXPECT_EQ(m->Stop(SIGINT), 0);
  EXPECT_EQ(c->Exist("a").code(), Code::kUnavailable);
  m.reset();
  ManagerProcess again(args);
  std::string second = RandomBytes(200000, 2);
  DeviceRegion two[] = {Of(second)};
  ASSERT_TRUE(c->PutFromDevice("b", two).ok());  // reconnects, maps the new pool
  EXPECT_EQ(c->Query("b")->media, MediumBit(Medium::kHbm));
  std::string back(200000, '\0');
  DeviceRegion into[] = {Of(back)};
  ASSERT_TRUE(c->GetIntoDevice("b", into).ok());
  EXPECT_TRUE(back == second);
  EXPECT_EQ(c->Exist("a").code(), Code::kNotFound);
  // Another client of the new manager reads what this one wrote.
  auto other = DeviceClient(again.uds());
  std::string again_back(200000, '\0');
  DeviceRegion into_again[] = {Of(again_back)};
  ASSERT_TRUE(other->GetIntoDevice("b", into_again).ok());
  EXPECT_TRUE(again_back == second);
}

}  // namespace
}  // namespace tierkv
