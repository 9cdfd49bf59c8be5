// tierkv::Client: the C++ client of a tierkv manager.
//
// Connect to "unix:/path/to/tierkv.sock" (same host) or "tcp://host:port".
// Over the Unix socket the manager hands over its DRAM pool at handshake and the
// client maps it: a put reserves space (alloc), copies the bytes straight into
// the pool and commits; a get takes a read lease, copies straight out of the pool
// and releases. Each byte is copied once. Over TCP the bytes travel inline in the
// frames and the client never sees pool memory.
//
// Every call names a tenant (default "default"); (tenant, key) identifies an
// object, and keys are opaque bytes. Batch calls make one round trip per chunk
// (chunks are split by the manager's batch and frame limits) and return one
// status per item, in input order.
//
// Errors: every call returns Status / Result with a code from status.h. A lost
// connection fails the call in progress with UNAVAILABLE; the next call
// reconnects (and, over the Unix socket, maps the pool again).
//
// Thread-safety: a Client may be shared by threads; its calls are serialised on
// one connection. For parallel transfers use one Client per thread.
//
// Ownership: buffers passed in are only read (puts) or written (gets) during the
// call; the client keeps no pointer to them afterwards.
#ifndef TIERKV_CLIENT_H_
#define TIERKV_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tierkv/status.h"
#include "tierkv/types.h"

namespace tierkv {

struct ClientOptions {
  uint32_t rank = 0;        // the engine's device rank, for per-rank metrics
  std::string client_name;  // free text shown in manager logs
  // The storage namespace every object this client puts is recorded in:
  // "tierkv:v1:<64 lowercase hex>", usually from DeriveNamespace; empty: none.
  // A malformed one makes Connect fail with INVALID_ARGUMENT.
  std::string name_space;
  int io_timeout_ms = 30000;  // a manager silent for this long fails the call
  // Pre-fault the whole pool mapping at connect (Unix socket only): costs a few
  // hundred ms per GiB once, saves page faults on every later put and get.
  // Short-lived tools turn it off.
  bool prefault_pool = true;
  // Busy-poll for a reply at most this long before sleeping (0 = never).
  // Waking a sleeping thread costs tens of microseconds on virtual machines,
  // on both sides of the socket. Each request kind is polled for about twice
  // its recent reply time plus 20 us (50 us before its first reply), and not
  // at all while its replies take this long or longer on average. A thread
  // whose polls lose the core to other tasks for more than 12.5 ms in 100 ms
  // stops polling for a while (1 ms, doubling up to 256 ms while that goes on).
  int spin_us = 400;
  // Unix socket only: Put and Upsert return once the value is copied and its
  // COMMIT is sent, without waiting for the answer; the next put's ALLOC goes
  // out before that answer is read, so a put costs one round trip, not two.
  // The outcome is known at the next call on this client (or at Flush): if
  // the commit failed (LEASE_EXPIRED: the copy outlasted --alloc-timeout-ms;
  // NOT_FOUND: the grant was revoked), or the connection was lost before its
  // answer (UNAVAILABLE), that call returns the failure, naming the key, and
  // does nothing else; calling it again performs it. Until then another
  // client may not see the object yet; this client's own later calls do
  // (a session's requests run in order). Off: every put waits for its commit.
  bool pipeline_commits = false;
  // Unix socket only: gets take no read lease. The manager answers where the
  // value is and the generation of its range; the client copies, then checks
  // the generation in the manager's generation table (mapped read-only). A
  // range freed during the copy (the object removed, replaced or evicted)
  // shows a newer generation: that item is read again under a lease, so a
  // copy is never torn. Saves the RELEASE message and the manager's lease
  // bookkeeping per get. Off: every get is a LEASE, copy, RELEASE.
  bool lease_free_reads = true;
  // GPU memory for PutFromDevice / GetIntoDevice (docs/hbm.md): "" none
  // (those calls fail with NOT_SUPPORTED); "cuda", the NVIDIA driver, loaded
  // when the client connects (Connect fails with UNAVAILABLE and the cause
  // when it cannot be); "host", stand-in devices whose addresses are host
  // addresses (tests and trials on hosts without a GPU).
  std::string device_copies;
  std::string cuda_library;  // with "cuda": the driver library ("": libcuda.so.1)
  // With device_copies over the Unix socket, when the manager has an HBM
  // tier (--hbm-devices): the client maps its pools at connect, a device put
  // goes into HBM (GPU to GPU; DRAM when HBM has no room), and a device get
  // of a value held in HBM copies GPU to GPU. False: device puts go to DRAM.
  bool device_puts_in_hbm = true;
};

struct WriteOptions {
  std::string_view tenant = kDefaultTenant;
  std::string_view group_id;  // optional grouping label stored with the object
};

struct PutItem {
  std::string_view key;
  const void* data = nullptr;
  size_t size = 0;
  std::string_view group_id;
};

struct GetItem {
  std::string_view key;
  void* buffer = nullptr;
  size_t capacity = 0;
  // The value must be exactly `capacity` bytes: any other size fails the item
  // with INVALID_ARGUMENT and nothing is copied (a fixed-size page never gets
  // part of a value).
  bool exact_size = false;
};

// One part of a scatter/gather object: `size` bytes of caller memory at `data`.
struct ConstRegion {
  const void* data = nullptr;
  size_t size = 0;
};
struct Region {
  void* data = nullptr;
  size_t size = 0;
};

// An object stored from several parts: its value is the concatenation of
// `parts`, in order (an engine page spread over its layers' buffers).
struct PutPartsItem {
  std::string_view key;
  std::span<const ConstRegion> parts;
  std::string_view group_id;
};

// An object read into several parts, in order. The value must be exactly the
// parts' total size: any other size fails the item with INVALID_ARGUMENT and
// nothing is copied into any part.
struct GetPartsItem {
  std::string_view key;
  std::span<const Region> parts;
};

// GPU memory of this process (ClientOptions::device_copies): `size` bytes at
// device address `ptr` (a CUdeviceptr, e.g. a CUDA tensor's data_ptr()), on
// any GPU of the process (the driver's unified addressing finds it).
struct DeviceRegion {
  uint64_t ptr = 0;
  size_t size = 0;
};

// An object stored from GPU memory: the concatenation of `parts`, in order.
struct DevicePutItem {
  std::string_view key;
  std::span<const DeviceRegion> parts;
  std::string_view group_id;
};

// An object read into GPU memory: the value must be exactly the parts' total
// size (any other size fails the item with INVALID_ARGUMENT, nothing copied).
struct DeviceGetItem {
  std::string_view key;
  std::span<const DeviceRegion> parts;
};

// A value pinned where it lies in the manager's shared pool (Client::Pin).
struct PinnedValue {
  uint64_t pin_id = 0;
  const uint8_t* data = nullptr;  // `size` bytes, read-only
  size_t size = 0;
  uint64_t incarnation = 0;             // of the connection that holds the pin
  std::shared_ptr<const void> mapping;  // keeps `data` mapped, even past the client
};

// Memory registered with the manager (Client::RegisterBuffer): `size` bytes
// at `data`, shared with the manager so that it can write gets' values there.
struct RegisteredBuffer {
  uint64_t id = 0;  // this client's handle, for UnregisterBuffer
  uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<void> mapping;  // keeps `data` mapped while held (even past the client)
};

struct RemoveAllStats {
  uint64_t removed = 0;
  uint64_t skipped = 0;  // leased or in-flight objects left in place (force=false)
  bool cleared = false;  // the tenant is now empty
};

struct KeyList {
  std::vector<std::string> keys;
  bool truncated = false;  // the reply hit the manager's frame limit
};

// The namespace of an engine's KV cache, from what determines its bytes (model
// artifacts, computation, representation, state group...): "tierkv:v1:" and the
// SHA-256, in lowercase hex, of the canonical JSON of `inputs` (an object with
// the keys sorted, no spaces, strings escaped as JSON requires, UTF-8 kept
// as is). The Python client's tierkv.derive_namespace gives the same string for
// the same inputs. Thread-safe.
std::string DeriveNamespace(const std::map<std::string, std::string>& inputs);

class Client {
 public:
  // Connects and performs the handshake. Errors: INVALID_ARGUMENT (bad address),
  // UNAVAILABLE (nobody listening), IO_ERROR, PROTOCOL_ERROR.
  static Result<std::unique_ptr<Client>> Connect(std::string_view address,
                                                 const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // True when connected over the Unix socket with the pool mapped.
  bool shared_memory() const;
  // The manager's limits, learnt at handshake.
  uint64_t max_object_bytes() const;
  uint32_t max_key_bytes() const;

  // Stores a new object. DUPLICATED when the key is already stored.
  Status Put(std::string_view key, const void* data, size_t size, const WriteOptions& options = {});
  Status Put(std::string_view key, std::string_view value, const WriteOptions& options = {}) {
    return Put(key, value.data(), value.size(), options);
  }
  // Stores or replaces.
  Status Upsert(std::string_view key, const void* data, size_t size,
                const WriteOptions& options = {});
  Status Upsert(std::string_view key, std::string_view value, const WriteOptions& options = {}) {
    return Upsert(key, value.data(), value.size(), options);
  }

  // Reads the outcome of a pipelined commit still unanswered
  // (ClientOptions::pipeline_commits) and returns its failure, if any; OK
  // when there is none. Call it before telling another process a put is done.
  Status Flush();

  // Copies the value into `buffer` and returns its length. NOT_FOUND on a miss;
  // TOO_LARGE when `capacity` is smaller than the value (nothing is copied; the
  // message gives the size); LEASE_EXPIRED when the copy took longer than the
  // read lease (the buffer content must be discarded).
  Result<size_t> Get(std::string_view key, void* buffer, size_t capacity,
                     std::string_view tenant = kDefaultTenant);
  // Returns the value as a new string.
  Result<std::string> Get(std::string_view key, std::string_view tenant = kDefaultTenant);
  // Copies the value once into memory the caller provides when its size is
  // known: `allocate(size)` returns where `size` bytes go (nullptr fails the
  // get with NO_SPACE). Returns the length. `allocate` runs on the calling
  // thread with the client's lock held (it must not call this client), and
  // may run a second time for the same get (a lease-free copy found torn is
  // read again): the last memory it returned holds the value.
  using Allocate = std::function<void*(size_t size)>;
  Result<size_t> Get(std::string_view key, const Allocate& allocate,
                     std::string_view tenant = kDefaultTenant);

  // Zero-copy read (Unix socket only): pins the value where it lies in the
  // shared pool and returns it in place. Its `size` bytes at `data` stay
  // valid and unchanged until Unpin or until this client's connection ends; a
  // remove, upsert, eviction or demotion meanwhile hides the old value and
  // frees its range only after the pin goes. When the connection ends (the
  // client reconnects, or is destroyed) the manager drops its pins:
  // PinHeld turns false and the bytes at `data` (still mapped: reading them
  // never faults) may be reused for other values. Counted as a get; in
  // cluster mode a miss is fetched from its owner first. One connection holds
  // at most the manager's --max-pinned-bytes (NO_SPACE over it). Errors: as
  // for Get; NOT_SUPPORTED over TCP.
  Result<PinnedValue> Pin(std::string_view key, std::string_view tenant = kDefaultTenant);
  // Ends a pin. The bytes must not be used after it. The manager learns of
  // it with this client's next call (the UNPIN shares that call's write), or
  // at Flush: until then the range stays pinned. The pin of a connection
  // that has ended is already gone: nothing is sent.
  Status Unpin(const PinnedValue& value);
  // Whether `value`'s pin is still held: its connection has not ended since.
  // Takes no lock (safe from any thread, even while another call runs).
  bool PinHeld(const PinnedValue& value) const;

  std::vector<Status> BatchPut(std::span<const PutItem> items,
                               std::string_view tenant = kDefaultTenant, bool upsert = false);
  // Per item: the value length, or an error as for Get (and INVALID_ARGUMENT
  // for an item with exact_size whose value has another size).
  std::vector<Result<size_t>> BatchGet(std::span<const GetItem> items,
                                       std::string_view tenant = kDefaultTenant);
  std::vector<Result<std::string>> BatchGet(std::span<const std::string_view> keys,
                                            std::string_view tenant = kDefaultTenant);
  // As Get with `allocate`, per key: `allocate(i, size)` for keys[i].
  using AllocateItem = std::function<void*(size_t index, size_t size)>;
  std::vector<Result<size_t>> BatchGet(std::span<const std::string_view> keys,
                                       const AllocateItem& allocate,
                                       std::string_view tenant = kDefaultTenant);

  // Scatter/gather: one object per item, gathered from (put) or scattered
  // into (get) its parts, on the same paths as BatchPut / BatchGet (one copy
  // per part straight into or out of the pool over the Unix socket; inline
  // bytes over TCP), one round trip per chunk. Per item: a status as for
  // BatchPut; for gets the value length, or an error as for BatchGet with
  // exact_size. Parts are only read / written during the call.
  std::vector<Status> BatchPutParts(std::span<const PutPartsItem> items,
                                    std::string_view tenant = kDefaultTenant, bool upsert = false);
  std::vector<Result<size_t>> BatchGetParts(std::span<const GetPartsItem> items,
                                            std::string_view tenant = kDefaultTenant);
  // One scatter/gather object: a batch of one.
  Status PutParts(std::string_view key, std::span<const ConstRegion> parts,
                  const WriteOptions& options = {}, bool upsert = false);
  Result<size_t> GetParts(std::string_view key, std::span<const Region> parts,
                          std::string_view tenant = kDefaultTenant);

  // GPU memory (ClientOptions::device_copies; docs/hbm.md). As
  // BatchPutParts / BatchGetParts, with parts in GPU memory: over the Unix
  // socket each part is copied once between the GPU and the manager's pool:
  // GPU to GPU with the manager's HBM pools (device_puts_in_hbm; a value held
  // in HBM), else device to host for a put and host to device for a get; over
  // TCP through a host buffer. Synchronisation: each call returns once the bytes are in
  // place (a put's in the store, a get's in the parts); the copies do not
  // wait for work the caller queued on its own streams, so a put's source
  // must be complete (synchronise the producing stream first). A copy the
  // driver refuses fails its item with IO_ERROR and the driver's message;
  // that item is not stored. NOT_SUPPORTED without device_copies.
  std::vector<Status> BatchPutFromDevice(std::span<const DevicePutItem> items,
                                         std::string_view tenant = kDefaultTenant,
                                         bool upsert = false);
  std::vector<Result<size_t>> BatchGetIntoDevice(std::span<const DeviceGetItem> items,
                                                 std::string_view tenant = kDefaultTenant);
  Status PutFromDevice(std::string_view key, std::span<const DeviceRegion> parts,
                       const WriteOptions& options = {}, bool upsert = false);
  Result<size_t> GetIntoDevice(std::string_view key, std::span<const DeviceRegion> parts,
                               std::string_view tenant = kDefaultTenant);

  // Registered memory (Unix socket; docs/cpp.md, "Registered memory").
  // Allocates `bytes` of shared memory (a memfd mapped here, pre-faulted,
  // sealed against shrinking) and registers it with the manager. From then
  // on a Get, BatchGet, GetParts or BatchGetParts whose memory lies wholly in
  // registered buffers is answered by the manager writing the value there
  // itself, in one request: a local hit is one copy out of the pool; a value
  // another manager holds is read by the data channel straight into this
  // memory, and no copy of it is kept on this manager. Results and errors are
  // the same as on the plain path; on an error the memory may hold part of
  // the value, never reported as read. Items whose memory is not registered
  // take the plain path in the same call. The memory is the caller's to use
  // as it likes (an engine's host KV pool); it stays mapped while the result
  // (or a copy of its `mapping`) is held. After a lost connection the client
  // registers it again at its next use. Errors: NOT_SUPPORTED (over TCP, or
  // the manager takes none: --max-registered-bytes 0), NO_SPACE (over the
  // manager's budgets), INVALID_ARGUMENT (0 bytes), IO_ERROR (the memfd).
  Result<RegisteredBuffer> RegisterBuffer(size_t bytes);
  // The manager forgets buffer `id` (its memory stays mapped while a
  // RegisteredBuffer holds it). NOT_FOUND: no such buffer of this client.
  Status UnregisterBuffer(uint64_t id);

  // Lookups. OK when stored, NOT_FOUND when not. In cluster mode a key the
  // manager does not hold is looked up in its global index of the other
  // owners (unless lookup.local_only): OK when another owner holds it (Query's
  // ObjectInfo::owner names it), NOT_FOUND only when absence is proved (every
  // owner's view is complete), UNAVAILABLE when it is unknown (a view is
  // incomplete) or outside the manager's metadata scope.
  Status Exist(std::string_view key, std::string_view tenant = kDefaultTenant,
               const LookupOptions& lookup = {});
  std::vector<Status> BatchExist(std::span<const std::string_view> keys,
                                 std::string_view tenant = kDefaultTenant,
                                 const LookupOptions& lookup = {});
  Result<ObjectInfo> Query(std::string_view key, std::string_view tenant = kDefaultTenant,
                           const LookupOptions& lookup = {});
  std::vector<Result<ObjectInfo>> BatchQuery(std::span<const std::string_view> keys,
                                             std::string_view tenant = kDefaultTenant,
                                             const LookupOptions& lookup = {});
  Status Remove(std::string_view key, std::string_view tenant = kDefaultTenant);
  std::vector<Status> BatchRemove(std::span<const std::string_view> keys,
                                  std::string_view tenant = kDefaultTenant);
  // Removes every object of `tenant`; leased or in-flight ones only with `force`.
  Result<RemoveAllStats> RemoveAll(std::string_view tenant = kDefaultTenant, bool force = false);
  // Stored keys of `tenant` that start with `prefix`, sorted; at most `limit` (0: all).
  Result<KeyList> ListKeys(std::string_view tenant = kDefaultTenant, std::string_view prefix = {},
                           uint32_t limit = 0);

  class Impl;

 private:
  friend class ClientTestPeer;  // test seams (src/client/client_test_peer.h)
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierkv

#endif  // TIERKV_CLIENT_H_
