// Puts from and gets into GPU memory (ClientOptions::device_copies) against a
// real manager, on the "host" stand-in devices (device addresses are host
// addresses): single, batch and scatter/gather over the Unix socket and TCP,
// every byte compared; a device copy that fails stores nothing and gives the
// grant back; a client without device copies refuses.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tierkv
