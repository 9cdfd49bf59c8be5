// Registered client memory (Client::RegisterBuffer, REGISTER, BATCH_GET_INTO)
// against a real manager: gets written by the manager into registered
// memory, single, batch and scatter/gather, every byte compared, beside
// items whose memory is not registered; sizes that do not fit; a client
// process that exits holding registrations; memory a client does not hold or
// cannot let the manager write, refused without harm to anyone; a manager
// restarted under a client.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "client_util.h"
#include "manager_process.h"
#include "raw_conn.h"
#include "scratch_dir.h"
#include "tierkv/client.h"
#include "wait_for.h"

namespace tierkv {
namespace {

using testing::ManagerProcess;
using testing::RandomBytes;
using testing::RawConn;
using testing::RawReply;
using testing::ScrapeMetric;
using testing::WaitFor;

std::unique_ptr<Client> Connect(const std::string& address) {
  return testing::ConnectWith(address, ClientOptions{});
}

int64_t LocalGets(const ManagerProcess& m) {
  return ScrapeMetric(m, "tierkv_registered_gets_total{where=\"local\"}");
}

TEST(RegisteredMemory, GetsIntoRegisteredMemoryCarryEveryByte) {
  ManagerProcess m;
  auto c = Connect(m.uds());
  ASSERT_TRUE(c);
  const std::vector<size_t> sizes = {1, 4096, 100000, 1 << 20, 3 * (1 << 20) + 7};
  std::vector<std::string> values;
  for (size_t i = 0; i < sizes.size(); ++i) {
    values.push_back(RandomBytes(sizes[i], static_cast<int>(i) + 1));
    ASSERT_TRUE(c->Put("k" + std::to_string(i), values.back()).ok());
  }
  Result<RegisteredBuffer> buf = c->RegisterBuffer(16 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  ASSERT_EQ(buf->size, size_t{16} << 20);
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_bytes"), 16 << 20);
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_regions"), 1);
  std::memset(buf->data, 0x5a, buf->size);

  // Single gets, at an offset that is not page-aligned.
  uint8_t* at = buf->data + 123;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Result<size_t> got = c->Get("k" + std::to_string(i), at, sizes.back());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(*got, sizes[i]);
    EXPECT_EQ(std::memcmp(at, values[i].data(), sizes[i]), 0) << i;
  }
  EXPECT_EQ(LocalGets(m), static_cast<int64_t>(sizes.size()));

  // A batch: registered items beside one whose buffer is not registered,
  // a miss, one too small and one of the wrong exact size.
  std::vector<char> plain(sizes[2]);
  std::vector<std::string> keys;
  for (size_t i = 0; i < sizes.size(); ++i) keys.push_back("k" + std::to_string(i));
  std::vector<GetItem> items;
  uint64_t off = 0;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < sizes.size(); ++i) {
    offsets.push_back(off);
    items.push_back({keys[i], buf->data + off, sizes[i], true});
    off += sizes[i] + 64;
  }
  items.push_back({"k2", plain.data(), plain.size(), true});
  items.push_back({"missing", buf->data + off, 10, false});
  items.push_back({"k3", buf->data + off, 100, false});  // too small
  items.push_back({"k1", buf->data + off, 4097, true});
  std::memset(buf->data + off, 0x11, 5000);
  std::vector<Result<size_t>> got = c->BatchGet(items);
  ASSERT_EQ(got.size(), items.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << i << " " << got[i].status().ToString();
    EXPECT_EQ(*got[i], sizes[i]);
    EXPECT_EQ(std::memcmp(buf->data + offsets[i], values[i].data(), sizes[i]), 0) << i;
  }
  ASSERT_TRUE(got[5].ok());
  EXPECT_EQ(std::memcmp(plain.data(), values[2].data(), sizes[2]), 0);
  EXPECT_EQ(got[6].status().code(), Code::kNotFound);
  EXPECT_EQ(got[7].status().code(), Code::kTooLarge) << got[7].status().ToString();
  EXPECT_EQ(got[8].status().code(), Code::kInvalidArgument) << got[8].status().ToString();
  // Nothing was written for the items that did not fit.
  for (size_t b = 0; b < 5000; ++b) ASSERT_EQ(buf->data[off + b], 0x11) << b;
  EXPECT_EQ(LocalGets(m), static_cast<int64_t>(2 * sizes.size()));

  // Scatter/gather: a value spread over pieces of two registered buffers.
  Result<RegisteredBuffer> second = c->RegisterBuffer(1 << 20);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const size_t big = sizes[3];
  const Region parts[] = {{buf->data + 7, 1000},
                          {second->data + 5, big / 2},
                          {buf->data + (8 << 20), big - 1000 - big / 2}};
  Result<size_t> sg = c->GetParts("k3", parts);
  ASSERT_TRUE(sg.ok()) << sg.status().ToString();
  std::string joined;
  for (const Region& p : parts) joined.append(static_cast<const char*>(p.data), p.size);
  EXPECT_TRUE(joined == values[3]);
  const Region short_parts[] = {{buf->data, 10}, {second->data, 10}};
  EXPECT_EQ(c->GetParts("k3", short_parts).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(LocalGets(m), static_cast<int64_t>(2 * sizes.size() + 1));
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_regions"), 2);

  // Unregistered, the same memory is served by the plain path.
  ASSERT_TRUE(c->UnregisterBuffer(second->id).ok());
  EXPECT_EQ(c->UnregisterBuffer(second->id).code(), Code::kNotFound);
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_regions"), 1);
  std::memset(second->data, 0, second->size);
  ASSERT_TRUE(c->Get("k2", second->data, second->size).ok());
  EXPECT_EQ(std::memcmp(second->data, values[2].data(), sizes[2]), 0);
  EXPECT_EQ(LocalGets(m), static_cast<int64_t>(2 * sizes.size() + 1));
}

// The manager's copy into registered memory is made under a read lease: a
// copy that outlasts it (here a 1 ms lease, a 96 MiB value) may have been
// overwritten meanwhile and is reported LEASE_EXPIRED, never as the value.
TEST(RegisteredMemory, ACopyThatOutlastsItsLeaseIsNotReportedAsTheValue) {
  ManagerProcess m({"--lease-ms", "1", "--dram-size", "256MiB", "--max-object-bytes", "128MiB"});
  auto c = Connect(m.uds());
  const std::string value = RandomBytes(96u << 20, 4);
  ASSERT_TRUE(c->Put("big", value).ok());
  Result<RegisteredBuffer> buf = c->RegisterBuffer(96u << 20);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  Result<size_t> got = c->Get("big", buf->data, buf->size);
  EXPECT_EQ(got.status().code(), Code::kLeaseExpired) << got.status().ToString();
  EXPECT_EQ(LocalGets(m), 0);
}

// A client process that exits (killed) holding registrations: the manager
// unmaps them and gives their bytes back to the budget.
TEST(RegisteredMemory, AClientThatExitsHoldingRegistrationsLeavesNothingBehind) {
  ManagerProcess m;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = Client::Connect(m.uds());
    bool ok = c.ok() && (*c)->RegisterBuffer(4 << 20).ok() && (*c)->RegisterBuffer(2 << 20).ok();
    const char byte = ok ? 'y' : 'n';
    (void)!write(ready[1], &byte, 1);
    pause();  // killed here, registrations held
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  ASSERT_EQ(byte, 'y');
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_bytes"), 6 << 20);
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_regions"), 2);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(WaitFor([&] { return ScrapeMetric(m, "tierkv_registered_regions") == 0; }));
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_bytes"), 0);
  // The budget it held is free again.
  auto c = Connect(m.uds());
  EXPECT_TRUE(c->RegisterBuffer(6 << 20).ok());
}

// REGISTER sent by hand with `fd` (or none) passed with it.
RawReply Register(RawConn& raw, int fd, uint64_t size, uint64_t inode) {
  std::string body;
  proto::Writer w(&body);
  w.U64(size);
  w.U64(inode);
  proto::FrameHeader h;
  h.opcode = static_cast<uint16_t>(proto::Opcode::kRegister);
  h.request_id = 7;
  std::string frame;
  proto::AppendFrame(&frame, h, body);
  if (fd >= 0) {
    const int fds[] = {fd};
    EXPECT_TRUE(proto::WriteWithFds(raw.fd(), frame.data(), frame.size(), fds).ok());
  } else {
    raw.SendBytes(frame);
  }
  RawReply r;
  EXPECT_TRUE(raw.Read(&r));
  return r;
}

uint64_t InodeOf(int fd) {
  struct stat st {};
  fstat(fd, &st);
  return st.st_ino;
}

int SealedMemfd(uint64_t size, int seals) {
  const int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  if (seals != 0) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  }
  return fd;
}

// A BATCH_GET_INTO of `key` into [offset, +length) of region `region`.
RawReply GetInto(RawConn& raw, std::string_view key, uint64_t region, uint64_t offset,
                 uint64_t length) {
  proto::GetIntoRequest req;
  req.tenant = kDefaultTenant;
  req.items.push_back({key, 0, 0, 1});
  req.pieces.push_back({region, offset, length});
  std::string body;
  proto::Writer w(&body);
  req.Encode(w);
  return raw.Call(proto::Opcode::kBatchGetInto, body);
}

// The status of the one item of a BATCH_GET_INTO reply.
Status ItemOf(const RawReply& r) {
  proto::Reader rd(r.body);
  EXPECT_EQ(rd.U32(), 1u);
  return rd.ItemStatus();
}

TEST(RegisteredMemory, MemoryAClientDoesNotHoldOrCannotLendIsRefused) {
  ManagerProcess m;
  auto owner = Connect(m.uds());
  const std::string value = RandomBytes(8192, 3);
  ASSERT_TRUE(owner->Put("v", value).ok());
  Result<RegisteredBuffer> mine = owner->RegisterBuffer(1 << 20);
  ASSERT_TRUE(mine.ok());
  std::memset(mine->data, 0x77, mine->size);

  RawConn raw(m.uds());
  // No descriptor at all.
  EXPECT_EQ(Register(raw, -1, 4096, 1).code(), Code::kInvalidArgument);
  // A regular file, not a memfd.
  testing::ScratchDir dir;
  const int file = open(dir.Sub("f").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(file, 0);
  ASSERT_EQ(ftruncate(file, 4096), 0);
  RawReply r = Register(raw, file, 4096, InodeOf(file));
  EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.message();
  close(file);
  // A memfd the client could shrink under the manager.
  const int unsealed = SealedMemfd(4096, 0);
  r = Register(raw, unsealed, 4096, InodeOf(unsealed));
  EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.message();
  EXPECT_NE(r.message().find("F_SEAL_SHRINK"), std::string::npos) << r.message();
  close(unsealed);
  // Sealed, but the manager may not write it.
  const int frozen = SealedMemfd(4096, F_SEAL_SHRINK | F_SEAL_WRITE);
  EXPECT_EQ(Register(raw, frozen, 4096, InodeOf(frozen)).code(), Code::kInvalidArgument);
  const int sealed = SealedMemfd(4096, F_SEAL_SHRINK);
  const int read_only = open(("/proc/self/fd/" + std::to_string(sealed)).c_str(), O_RDONLY);
  ASSERT_GE(read_only, 0);
  EXPECT_EQ(Register(raw, read_only, 4096, InodeOf(read_only)).code(), Code::kInvalidArgument);
  close(read_only);
  close(frozen);
  // Another size than the memfd's, and a descriptor of another file than named.
  EXPECT_EQ(Register(raw, sealed, 8192, InodeOf(sealed)).code(), Code::kInvalidArgument);
  EXPECT_EQ(Register(raw, sealed, 4096, InodeOf(sealed) + 1).code(), Code::kInvalidArgument);
  // The manager's own pool, whose descriptor every Unix-socket client holds:
  // writable and sealed, but not the client's memory.
  RawConn pool_holder(m.uds());
  ASSERT_GE(pool_holder.pool_fd(), 0);
  struct stat pool_stat {};
  ASSERT_EQ(fstat(pool_holder.pool_fd(), &pool_stat), 0);
  r = Register(raw, pool_holder.pool_fd(), static_cast<uint64_t>(pool_stat.st_size),
               pool_stat.st_ino);
  EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.message();
  EXPECT_NE(r.message().find("own shared memory"), std::string::npos) << r.message();
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registrations_refused_total"), 8);
  EXPECT_EQ(ScrapeMetric(m, "tierkv_registered_regions"), 1);  // the owner's only

  // Another session's region id means nothing here: the owner's memory
  // (region 1 of its session) is never written.
  RawReply into = GetInto(raw, "v", 1, 0, 8192);
  ASSERT_EQ(into.code(), Code::kOk);
  EXPECT_EQ(ItemOf(into).code(), Code::kNotFound);
  for (size_t b = 0; b < 8192; ++b) ASSERT_EQ(mine->data[b], 0x77) << b;
  // This session's own region, and ranges outside it.
  r = Register(raw, sealed, 4096, InodeOf(sealed));
  ASSERT_EQ(r.code(), Code::kOk) << r.message();
  proto::Reader rd(r.body);
  const uint64_t region = rd.U64();
  EXPECT_EQ(ItemOf(GetInto(raw, "v", region, 1, 4096)).code(), Code::kInvalidArgument);
  EXPECT_EQ(ItemOf(GetInto(raw, "v", region, ~0ull - 10, 20)).code(), Code::kInvalidArgument);
  EXPECT_EQ(ItemOf(GetInto(raw, "v", region, 0, 4096)).code(), Code::kTooLarge);
  close(sealed);
  // The manager serves on, and the owner's value and memory are intact.
  std::string back(8192, '\0');
  ASSERT_TRUE(owner->Get("v", back.data(), back.size()).ok());
  EXPECT_TRUE(back == value);
  EXPECT_EQ(std::memcmp(back.data(), value.data(), 8192), 0);

  // Over TCP there is nothing to register.
  auto tcp = Connect(m.tcp());
  EXPECT_EQ(tcp->RegisterBuffer(4096).status().code(), Code::kNotSupported);
}

TEST(RegisteredMemory, BudgetsBoundWhatClientsRegister) {
  ManagerProcess m({"--max-registered-bytes", "8MiB", "--max-registered-bytes-per-client", "6MiB",
                    "--max-registered-regions-per-client", "2"});
  auto a = Connect(m.uds());
  auto b = Connect(m.uds());
  ASSERT_TRUE(a->RegisterBuffer(4 << 20).ok());
  EXPECT_EQ(a->RegisterBuffer(3 << 20).status().code(), Code::kNoSpace);  // per client
  ASSERT_TRUE(a->RegisterBuffer(1 << 20).ok());
  EXPECT_EQ(a->RegisterBuffer(4096).status().code(), Code::kNoSpace);     // regions
  EXPECT_EQ(b->RegisterBuffer(4 << 20).status().code(), Code::kNoSpace);  // all clients
  ASSERT_TRUE(b->RegisterBuffer(3 << 20).ok());
  ManagerProcess none({"--max-registered-bytes", "0"});
  auto c = Connect(none.uds());
  EXPECT_EQ(c->RegisterBuffer(4096).status().code(), Code::kNotSupported);
}

// A manager restarted under a client: its buffer is registered again with the
// new manager at its next get, and gets go on landing in it.
TEST(RegisteredMemory, AClientRegistersItsBufferAgainWithARestartedManager) {
  const std::string path = "/tmp/tierkv-registered-" + std::to_string(getpid()) + ".sock";
  testing::UnlinkAtExit unlink_at_end(path);
  const std::vector<std::string> args = {"--uds-path", path, "--dram-size", "64MiB"};
  auto m = std::make_unique<ManagerProcess>(args);
  auto c = Connect(m->uds());
  Result<RegisteredBuffer> buf = c->RegisterBuffer(1 << 20);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(m->Stop(SIGINT), 0);
  EXPECT_EQ(c->Exist("a").code(), Code::kUnavailable);
  m.reset();
  ManagerProcess again(args);
  const std::string value = RandomBytes(300000, 9);
  ASSERT_TRUE(c->Put("a", value).ok());
  Result<size_t> got = c->Get("a", buf->data, buf->size);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::memcmp(buf->data, value.data(), value.size()), 0);
  EXPECT_EQ(LocalGets(again), 1);
  EXPECT_EQ(ScrapeMetric(again, "tierkv_registered_regions"), 1);
}

}  // namespace
}  // namespace tierkv
