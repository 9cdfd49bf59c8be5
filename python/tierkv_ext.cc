// _tierkv: the Python binding of tierkv::Client (python/tierkv wraps it).
//
// Buffers: any object with the buffer protocol (bytes, bytearray, memoryview,
// numpy arrays; C-contiguous), or a raw address + length for memory an engine
// registered itself. Bytes are copied exactly once, between that buffer and the
// manager's shared pool (Unix socket) or the socket (TCP). The GIL is released
// for every call into the client, copies included.
//
// Errors: a failed call raises the exception class that python/tierkv/errors.py
// maps to the status code (installed with _set_error_factory at import).
#include <malloc.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "device_parts.h"
#include "registered_buffer.h"
#include "tierkv/client.h"
#include "value_view.h"

namespace py = pybind11;

namespace {

using tierkv::Code;
using tierkv::Status;
using tierkv::python::DeviceParts;

// Set by errors.py: factory(code:int, name:str, message:str) -> exception instance.
py::object& ErrorFactory() {
  static py::object* factory = new py::object();
  return *factory;
}

struct StatusError {
  Status status;
};

[[noreturn]] void Raise(const Status& st) { throw StatusError{st}; }

void Check(const Status& st) {
  if (!st.ok()) Raise(st);
}

// A view of a Python buffer, held for the duration of one call.
class Buffer {
 public:
  Buffer(const py::handle& obj, bool writable) {
    const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) throw py::error_already_set();
    held_ = true;
  }
  ~Buffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : view_(o.view_), held_(o.held_) { o.held_ = false; }
  void* data() const { return view_.buf; }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// Keys are str (UTF-8) or bytes.
std::string KeyOf(const py::handle& key) {
  if (py::isinstance<py::bytes>(key)) return std::string(py::reinterpret_borrow<py::bytes>(key));
  if (py::isinstance<py::str>(key)) return key.cast<std::string>();
  throw py::type_error("a key must be str or bytes");
}

// Keys come back as str when they are valid UTF-8, else as bytes.
py::object KeyToPython(const std::string& key) {
  PyObject* s = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), nullptr);
  if (s != nullptr) return py::reinterpret_steal<py::object>(s);
  PyErr_Clear();
  return py::bytes(key);
}

py::dict InfoToDict(const tierkv::ObjectInfo& info) {
  py::list media;
  for (int m = 0; m < tierkv::kMediumCount; ++m) {
    if (info.media & (1u << m))
      media.append(std::string(tierkv::MediumName(static_cast<tierkv::Medium>(m))));
  }
  py::dict d;
  d["size"] = info.size;
  d["group_id"] = info.group_id;
  d["media"] = media;
  d["active_leases"] = info.active_leases;
  d["state"] = static_cast<int>(info.state);
  d["lease_expires_unix_ms"] = info.lease_expires_unix_ms;
  d["last_access_unix_ms"] = info.last_access_unix_ms;
  d["namespace"] = info.name_space;
  // Cluster mode: the owning manager when it is not the one asked (else None).
  d["owner"] = info.owner.empty() ? py::object(py::none()) : py::object(py::str(info.owner));
  d["owner_rank"] = info.owner_rank;
  return d;
}

// The Python-visible per-item status of batch calls.
struct ItemStatus {
  int code = 0;
  std::string message;
  size_t size = 0;  // bytes copied, for batch_get_into
  bool ok() const { return code == 0; }
  std::string name() const { return std::string(tierkv::CodeName(static_cast<Code>(code))); }
};

ItemStatus ToPy(const Status& st, size_t size = 0) {
  return ItemStatus{static_cast<int>(st.code()), st.message(), size};
}

// The parts of scatter/gather items, from nested Python lists (each part a
// buffer or an (address, length) tuple) or from flat address and length
// lists with the same number of parts per key. Holds the buffers it views.
class Parts {
 public:
  Parts(const py::list& per_key, bool writable) {
    for (const py::handle& item : per_key) {
      if (!py::isinstance<py::list>(item) && !py::isinstance<py::tuple>(item)) {
        throw py::type_error("the parts of each key are a list of buffers or (address, length)");
      }
      starts_.push_back(regions_.size());
      for (const py::handle& part : item) {
        if (py::isinstance<py::tuple>(part)) {
          py::tuple t = py::reinterpret_borrow<py::tuple>(part);
          if (t.size() != 2) throw py::value_error("a part is a buffer or (address, length)");
          regions_.push_back(
              {reinterpret_cast<void*>(t[0].cast<uintptr_t>()), t[1].cast<size_t>()});
        } else {
          bufs_.push_back(std::make_unique<Buffer>(part, writable));
          regions_.push_back({bufs_.back()->data(), bufs_.back()->size()});
        }
      }
    }
    starts_.push_back(regions_.size());
  }
  Parts(size_t keys, const std::vector<uintptr_t>& addresses, const std::vector<size_t>& lengths) {
    if (addresses.size() != lengths.size()) {
      throw py::value_error("addresses and lengths differ in count");
    }
    if (keys == 0 ? !addresses.empty() : addresses.size() % keys != 0) {
      throw py::value_error(
          "each key needs the same number of parts: " + std::to_string(addresses.size()) +
          " regions for " + std::to_string(keys) + " keys");
    }
    const size_t per = keys == 0 ? 0 : addresses.size() / keys;
    regions_.reserve(addresses.size());
    for (size_t i = 0; i < addresses.size(); ++i) {
      regions_.push_back({reinterpret_cast<void*>(addresses[i]), lengths[i]});
    }
    for (size_t k = 0; k <= keys; ++k) starts_.push_back(k * per);
  }
  size_t keys() const { return starts_.size() - 1; }
  std::span<const tierkv::Region> Of(size_t key) const {
    return std::span<const tierkv::Region>(regions_).subspan(starts_[key],
                                                             starts_[key + 1] - starts_[key]);
  }
  // The same parts, read-only (for puts).
  std::span<const tierkv::ConstRegion> ConstOf(size_t key) {
    if (const_regions_.size() != regions_.size()) {
      const_regions_.clear();
      for (const tierkv::Region& r : regions_) const_regions_.push_back({r.data, r.size});
    }
    return std::span<const tierkv::ConstRegion>(const_regions_)
        .subspan(starts_[key], starts_[key + 1] - starts_[key]);
  }

 private:
  std::vector<std::unique_ptr<Buffer>> bufs_;
  std::vector<tierkv::Region> regions_;
  std::vector<tierkv::ConstRegion> const_regions_;
  std::vector<size_t> starts_;
};

// Makes an uninitialised bytes object of `n` bytes in *out (replacing what
// it held) and returns its buffer; nullptr when Python has no memory for it.
// Called without the GIL; takes it for the allocation only.
void* NewBytes(size_t n, py::object* out) {
  py::gil_scoped_acquire gil;
  PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
  if (b == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  *out = py::reinterpret_steal<py::object>(b);
  return PyBytes_AS_STRING(b);
}

class PyClient {
 public:
  PyClient(const std::string& address, std::string tenant, uint32_t rank, int timeout_ms,
           std::string client_name, std::string name_space, bool pipeline_commits,
           bool lease_free_reads, std::string device_copies, std::string cuda_library,
           bool device_puts_in_hbm)
      : tenant_(std::move(tenant)) {
    tierkv::ClientOptions o;
    o.device_puts_in_hbm = device_puts_in_hbm;
    o.device_copies = std::move(device_copies);
    o.cuda_library = std::move(cuda_library);
    o.rank = rank;
    o.pipeline_commits = pipeline_commits;
    o.lease_free_reads = lease_free_reads;
    o.io_timeout_ms = timeout_ms;
    o.client_name = std::move(client_name);
    o.name_space = std::move(name_space);
    tierkv::Result<std::unique_ptr<tierkv::Client>> c = [&] {
      py::gil_scoped_release nogil;
      return tierkv::Client::Connect(address, o);
    }();
    if (!c.ok()) Raise(c.status());
    client_ = std::move(c).value();
  }

  void Close() { client_.reset(); }
  bool closed() const { return client_ == nullptr; }
  // Without the GIL: the client's lock may be held by a call that waits for
  // the GIL (Get's allocation).
  bool shared_memory() const {
    tierkv::Client& c = C();
    py::gil_scoped_release nogil;
    return c.shared_memory();
  }
  const std::string& tenant() const { return tenant_; }

  void Put(const py::handle& key, const py::handle& value, const py::object& group,
           const py::object& tenant, bool upsert) {
    const std::string k = KeyOf(key);
    Buffer buf(value, false);
    PutRaw(k, buf.data(), buf.size(), group, tenant, upsert);
  }

  void PutFrom(const py::handle& key, const py::handle& source, const py::object& length,
               const py::object& group, const py::object& tenant, bool upsert) {
    const std::string k = KeyOf(key);
    if (py::isinstance<py::int_>(source)) {
      if (length.is_none()) throw py::value_error("put_from(address) needs a length");
      PutRaw(k, reinterpret_cast<const void*>(source.cast<uintptr_t>()), length.cast<size_t>(),
             group, tenant, upsert);
      return;
    }
    Buffer buf(source, false);
    const size_t n = length.is_none() ? buf.size() : std::min(buf.size(), length.cast<size_t>());
    PutRaw(k, buf.data(), n, group, tenant, upsert);
  }

  tierkv::RegisteredBuffer RegisterBuffer(size_t size) {
    tierkv::Client& c = C();
    tierkv::Result<tierkv::RegisteredBuffer> r = [&] {
      py::gil_scoped_release nogil;
      return c.RegisterBuffer(size);
    }();
    Check(r.status());
    return std::move(r).value();
  }
  void UnregisterBuffer(const py::handle& buf) {
    const uint64_t id = py::isinstance<py::int_>(buf) ? buf.cast<uint64_t>()
                                                      : buf.cast<tierkv::RegisteredBuffer&>().id;
    tierkv::Client& c = C();
    const Status st = [&] {
      py::gil_scoped_release nogil;
      return c.UnregisterBuffer(id);
    }();
    Check(st);
  }

  // A pinned, zero-copy view of the value; None on a miss.
  py::object GetView(const py::handle& key, const py::object& tenant) {
    const std::string k = KeyOf(key);
    const std::string t = TenantOr(tenant);
    tierkv::Client& c = C();
    tierkv::Result<tierkv::PinnedValue> r = [&] {
      py::gil_scoped_release nogil;
      return c.Pin(k, t);
    }();
    if (r.code() == Code::kNotFound) return py::none();
    Check(r.status());
    return py::cast(new tierkv::python::ValueView(client_, std::move(r).value()),
                    py::return_value_policy::take_ownership);
  }

  // The value lands straight in the bytes object returned: the object is
  // made (under the GIL) once the size is known, then filled without it.
  py::object Get(const py::handle& key, const py::object& tenant) {
    const std::string k = KeyOf(key);
    const std::string t = TenantOr(tenant);
    py::object value;  // destroyed with the GIL held
    tierkv::Result<size_t> r = [&] {
      py::gil_scoped_release nogil;
      return C().Get(
          k, [&](size_t n) { return NewBytes(n, &value); }, t);
    }();
    if (r.code() == Code::kNotFound) return py::none();
    Check(r.status());
    return value;
  }

  py::object GetInto(const py::handle& key, const py::handle& target, const py::object& length,
                     const py::object& tenant) {
    const std::string k = KeyOf(key);
    const std::string t = TenantOr(tenant);
    void* dst = nullptr;
    size_t cap = 0;
    std::unique_ptr<Buffer> buf;
    if (py::isinstance<py::int_>(target)) {
      if (length.is_none()) throw py::value_error("get_into(address) needs a length");
      dst = reinterpret_cast<void*>(target.cast<uintptr_t>());
      cap = length.cast<size_t>();
    } else {
      buf = std::make_unique<Buffer>(target, true);
      dst = buf->data();
      cap = length.is_none() ? buf->size() : std::min(buf->size(), length.cast<size_t>());
    }
    tierkv::Result<size_t> r = [&] {
      py::gil_scoped_release nogil;
      return C().Get(k, dst, cap, t);
    }();
    if (r.code() == Code::kNotFound) return py::none();
    Check(r.status());
    return py::int_(*r);
  }

  // Items: (key, buffer), (key, buffer, group_id) or (key, address, length).
  std::vector<ItemStatus> BatchPut(const py::list& items, const py::object& tenant, bool upsert) {
    std::vector<std::string> keys, groups;
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::vector<tierkv::PutItem> put;
    for (const py::handle& item : items) {
      if (!py::isinstance<py::tuple>(item)) {
        throw py::type_error("batch put items are tuples");
      }
      py::tuple t = py::reinterpret_borrow<py::tuple>(item);
      if (t.size() < 2 || t.size() > 3) {
        throw py::value_error(
            "batch put items are (key, value), (key, value, group_id) or (key, address, length)");
      }
      keys.push_back(KeyOf(t[0]));
      const bool raw = t.size() == 3 && py::isinstance<py::int_>(t[1]);
      if (raw) {
        put.push_back(
            {{}, reinterpret_cast<const void*>(t[1].cast<uintptr_t>()), t[2].cast<size_t>(), {}});
        groups.emplace_back();
      } else {
        bufs.push_back(std::make_unique<Buffer>(t[1], false));
        put.push_back({{}, bufs.back()->data(), bufs.back()->size(), {}});
        groups.push_back(t.size() == 3 && !t[2].is_none() ? t[2].cast<std::string>() : "");
      }
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      put[i].key = keys[i];
      put[i].group_id = groups[i];
    }
    const std::string t = TenantOr(tenant);
    std::vector<Status> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchPut(put, t, upsert);
    }
    std::vector<ItemStatus> out;
    for (const Status& st : res) out.push_back(ToPy(st));
    return out;
  }

  // Values (bytes) or None for misses; a real error raises with every status.
  // Each value lands straight in its bytes object, as in Get.
  py::list BatchGet(const py::list& keys, const py::object& tenant) {
    std::vector<std::string> ks = Keys(keys);
    std::vector<std::string_view> views(ks.begin(), ks.end());
    const std::string t = TenantOr(tenant);
    std::vector<py::object> values(ks.size());  // destroyed with the GIL held
    std::vector<tierkv::Result<size_t>> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchGet(
          views, [&](size_t i, size_t n) { return NewBytes(n, &values[i]); }, t);
    }
    py::list out;
    for (size_t i = 0; i < res.size(); ++i) {
      out.append(res[i].ok() ? values[i] : py::none());
    }
    for (const auto& r : res) {
      if (!r.ok() && r.code() != Code::kNotFound) Raise(r.status());
    }
    return out;
  }

  // targets: buffers, or (address, length) tuples. Statuses carry the sizes.
  std::vector<ItemStatus> BatchGetInto(const py::list& keys, const py::list& targets,
                                       const py::object& tenant, bool exact) {
    if (keys.size() != targets.size()) {
      throw py::value_error("batch_get_into needs as many targets as keys");
    }
    std::vector<std::string> ks = Keys(keys);
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::vector<tierkv::GetItem> items;
    for (size_t i = 0; i < ks.size(); ++i) {
      py::handle tgt = targets[i];
      if (py::isinstance<py::tuple>(tgt)) {
        py::tuple t = py::reinterpret_borrow<py::tuple>(tgt);
        items.push_back({{}, reinterpret_cast<void*>(t[0].cast<uintptr_t>()), t[1].cast<size_t>()});
      } else {
        bufs.push_back(std::make_unique<Buffer>(tgt, true));
        items.push_back({{}, bufs.back()->data(), bufs.back()->size()});
      }
    }
    for (size_t i = 0; i < ks.size(); ++i) {
      items[i].key = ks[i];
      items[i].exact_size = exact;
    }
    const std::string t = TenantOr(tenant);
    std::vector<tierkv::Result<size_t>> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchGet(items, t);
    }
    std::vector<ItemStatus> out;
    for (const auto& r : res) out.push_back(r.ok() ? ToPy(Status::Ok(), *r) : ToPy(r.status()));
    return out;
  }

  // Scatter/gather puts and gets: one object per key, its parts in `parts`.
  std::vector<ItemStatus> PutParts(const py::list& keys, Parts parts, const py::object& tenant,
                                   bool upsert) {
    if (parts.keys() != keys.size()) throw py::value_error("one list of parts per key");
    std::vector<std::string> ks = Keys(keys);
    std::vector<tierkv::PutPartsItem> items(ks.size());
    for (size_t i = 0; i < ks.size(); ++i) items[i] = {ks[i], parts.ConstOf(i), {}};
    const std::string t = TenantOr(tenant);
    std::vector<Status> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchPutParts(items, t, upsert);
    }
    std::vector<ItemStatus> out;
    out.reserve(res.size());
    for (const Status& st : res) out.push_back(ToPy(st));
    return out;
  }

  std::vector<ItemStatus> GetParts(const py::list& keys, Parts parts, const py::object& tenant) {
    if (parts.keys() != keys.size()) throw py::value_error("one list of parts per key");
    std::vector<std::string> ks = Keys(keys);
    std::vector<tierkv::GetPartsItem> items(ks.size());
    for (size_t i = 0; i < ks.size(); ++i) items[i] = {ks[i], parts.Of(i)};
    const std::string t = TenantOr(tenant);
    std::vector<tierkv::Result<size_t>> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchGetParts(items, t);
    }
    std::vector<ItemStatus> out;
    out.reserve(res.size());
    for (const auto& r : res) out.push_back(r.ok() ? ToPy(Status::Ok(), *r) : ToPy(r.status()));
    return out;
  }

  // Puts from and gets into GPU memory: one object per key, its parts in `parts`.
  std::vector<ItemStatus> PutDevice(const py::list& keys, const DeviceParts& parts,
                                    const py::object& tenant, bool upsert) {
    if (parts.keys() != keys.size()) throw py::value_error("one list of parts per key");
    std::vector<std::string> ks = Keys(keys);
    std::vector<tierkv::DevicePutItem> items(ks.size());
    for (size_t i = 0; i < ks.size(); ++i) items[i] = {ks[i], parts.Of(i), {}};
    const std::string t = TenantOr(tenant);
    std::vector<Status> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchPutFromDevice(items, t, upsert);
    }
    std::vector<ItemStatus> out;
    out.reserve(res.size());
    for (const Status& st : res) out.push_back(ToPy(st));
    return out;
  }

  std::vector<ItemStatus> GetDevice(const py::list& keys, const DeviceParts& parts,
                                    const py::object& tenant) {
    if (parts.keys() != keys.size()) throw py::value_error("one list of parts per key");
    std::vector<std::string> ks = Keys(keys);
    std::vector<tierkv::DeviceGetItem> items(ks.size());
    for (size_t i = 0; i < ks.size(); ++i) items[i] = {ks[i], parts.Of(i)};
    const std::string t = TenantOr(tenant);
    std::vector<tierkv::Result<size_t>> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchGetIntoDevice(items, t);
    }
    std::vector<ItemStatus> out;
    out.reserve(res.size());
    for (const auto& r : res) out.push_back(r.ok() ? ToPy(Status::Ok(), *r) : ToPy(r.status()));
    return out;
  }

  bool Exists(const py::handle& key, const py::object& tenant, bool local_only) {
    const std::string k = KeyOf(key);
    const std::string t = TenantOr(tenant);
    Status st;
    {
      py::gil_scoped_release nogil;
      st = C().Exist(k, t, {local_only});
    }
    if (st.code() == Code::kNotFound) return false;
    Check(st);
    return true;
  }

  std::vector<bool> BatchExists(const py::list& keys, const py::object& tenant, bool local_only) {
    std::vector<std::string> ks = Keys(keys);
    std::vector<std::string_view> views(ks.begin(), ks.end());
    const std::string t = TenantOr(tenant);
    std::vector<Status> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchExist(views, t, {local_only});
    }
    std::vector<bool> out;
    for (const Status& st : res) {
      if (!st.ok() && st.code() != Code::kNotFound) Raise(st);
      out.push_back(st.ok());
    }
    return out;
  }

  py::dict Query(const py::handle& key, const py::object& tenant, bool local_only) {
    const std::string k = KeyOf(key);
    const std::string t = TenantOr(tenant);
    tierkv::Result<tierkv::ObjectInfo> r = [&] {
      py::gil_scoped_release nogil;
      return C().Query(k, t, {local_only});
    }();
    Check(r.status());
    return InfoToDict(*r);
  }

  py::list BatchQuery(const py::list& keys, const py::object& tenant, bool local_only) {
    std::vector<std::string> ks = Keys(keys);
    std::vector<std::string_view> views(ks.begin(), ks.end());
    const std::string t = TenantOr(tenant);
    std::vector<tierkv::Result<tierkv::ObjectInfo>> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchQuery(views, t, {local_only});
    }
    py::list out;
    for (const auto& r : res) {
      if (r.ok()) {
        out.append(InfoToDict(*r));
      } else if (r.code() == Code::kNotFound) {
        out.append(py::none());
      } else {
        Raise(r.status());
      }
    }
    return out;
  }

  void Flush() {
    Status st;
    {
      py::gil_scoped_release nogil;
      st = C().Flush();
    }
    Check(st);
  }

  void Remove(const py::handle& key, const py::object& tenant) {
    const std::string k = KeyOf(key);
    const std::string t = TenantOr(tenant);
    Status st;
    {
      py::gil_scoped_release nogil;
      st = C().Remove(k, t);
    }
    Check(st);
  }

  std::vector<ItemStatus> BatchRemove(const py::list& keys, const py::object& tenant) {
    std::vector<std::string> ks = Keys(keys);
    std::vector<std::string_view> views(ks.begin(), ks.end());
    const std::string t = TenantOr(tenant);
    std::vector<Status> res;
    {
      py::gil_scoped_release nogil;
      res = C().BatchRemove(views, t);
    }
    std::vector<ItemStatus> out;
    for (const Status& st : res) out.push_back(ToPy(st));
    return out;
  }

  py::dict RemoveAll(const py::object& tenant, bool force) {
    const std::string t = TenantOr(tenant);
    tierkv::Result<tierkv::RemoveAllStats> r = [&] {
      py::gil_scoped_release nogil;
      return C().RemoveAll(t, force);
    }();
    Check(r.status());
    py::dict d;
    d["removed"] = r->removed;
    d["skipped"] = r->skipped;
    d["cleared"] = r->cleared;
    return d;
  }

  py::list ListKeys(const std::string& prefix, uint32_t limit, const py::object& tenant) {
    const std::string t = TenantOr(tenant);
    tierkv::Result<tierkv::KeyList> r = [&] {
      py::gil_scoped_release nogil;
      return C().ListKeys(t, prefix, limit);
    }();
    Check(r.status());
    py::list out;
    for (const std::string& k : r->keys) out.append(KeyToPython(k));
    return out;
  }

 private:
  tierkv::Client& C() const {
    if (!client_) Raise(Status(Code::kUnavailable, "the client is closed"));
    return *client_;
  }
  std::string TenantOr(const py::object& tenant) const {
    return tenant.is_none() ? tenant_ : tenant.cast<std::string>();
  }
  std::vector<std::string> Keys(const py::list& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const py::handle& k : keys) out.push_back(KeyOf(k));
    return out;
  }
  void PutRaw(const std::string& key, const void* data, size_t size, const py::object& group,
              const py::object& tenant, bool upsert) {
    const std::string g = group.is_none() ? "" : group.cast<std::string>();
    const std::string t = TenantOr(tenant);
    Status st;
    {
      py::gil_scoped_release nogil;
      tierkv::WriteOptions o{t, g};
      st = upsert ? C().Upsert(key, data, size, o) : C().Put(key, data, size, o);
    }
    Check(st);
  }

  std::string tenant_;
  std::shared_ptr<tierkv::Client> client_;  // views hold it weakly
};

}  // namespace

// get / batch_get return values in new bytes objects. glibc gives a freed
// chunk of 128 KiB or more (mmapped), and a heap top over 128 KiB, back to the
// system at once, so every batch of fresh values faulted each of its pages in
// again (16 353 faults per batch_get of 64 x 1 MiB). Freed memory is kept for
// reuse instead: chunks under 32 MiB come from the heap, and up to 1 GiB of
// freed heap is kept. Left alone when the process tunes malloc itself
// (MALLOC_*_ environment variables, GLIBC_TUNABLES) or sets
// TIERKV_KEEP_FREED_MEMORY=0. Returns whether it applied.
bool KeepFreedMemory() {
  const char* keep = std::getenv("TIERKV_KEEP_FREED_MEMORY");
  if (keep != nullptr && std::string_view(keep) == "0") return false;
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("GLIBC_TUNABLES") != nullptr) {
    return false;
  }
  return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
}

PYBIND11_MODULE(_tierkv, m) {
  m.doc() = "Low-level binding of the tierkv C++ client; use the tierkv package.";
  m.attr("keeps_freed_memory") = KeepFreedMemory();
  m.def("derive_namespace", &tierkv::DeriveNamespace, py::arg("inputs"),
        "The C++ client's DeriveNamespace (tierkv.derive_namespace is the same in Python)");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object& factory = ErrorFactory();
      if (!factory) {
        PyErr_SetString(PyExc_RuntimeError, e.status.ToString().c_str());
        return;
      }
      py::object exc = factory(static_cast<int>(e.status.code()),
                               std::string(tierkv::CodeName(e.status.code())), e.status.message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  m.def("_set_error_factory", [](py::object f) { ErrorFactory() = std::move(f); });
  m.def("code_name",
        [](int code) { return std::string(tierkv::CodeName(static_cast<Code>(code))); });

  py::class_<ItemStatus>(m, "Status", "Outcome of one item of a batch call.")
      .def_readonly("code", &ItemStatus::code, "numeric status code (0 = OK)")
      .def_readonly("message", &ItemStatus::message, "the manager's explanation, empty on OK")
      .def_readonly("size", &ItemStatus::size, "bytes copied (batch_get_into only)")
      .def_property_readonly("ok", &ItemStatus::ok)
      .def_property_readonly("name", &ItemStatus::name, "code name, e.g. 'NOT_FOUND'")
      .def("__bool__", &ItemStatus::ok)
      .def("__repr__", [](const ItemStatus& s) {
        return "Status(" + s.name() + (s.message.empty() ? "" : ", '" + s.message + "'") + ")";
      });

  tierkv::python::ValueView::Register(m);
  tierkv::python::RegisterRegisteredBuffer(m);

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, std::string, uint32_t, int, std::string, std::string, bool,
                    bool, std::string, std::string, bool>(),
           py::arg("address"), py::arg("tenant") = "default", py::arg("rank") = 0,
           py::arg("timeout_ms") = 30000, py::arg("client_name") = "python",
           py::arg("namespace") = "", py::arg("pipeline_commits") = false,
           py::arg("lease_free_reads") = true, py::arg("device_copies") = "",
           py::arg("cuda_library") = "", py::arg("device_puts_in_hbm") = true)
      .def("register_buffer", &PyClient::RegisterBuffer, py::arg("size"))
      .def("unregister_buffer", &PyClient::UnregisterBuffer, py::arg("buffer"))
      .def("close", &PyClient::Close)
      .def("flush", &PyClient::Flush)
      .def_property_readonly("closed", &PyClient::closed)
      .def_property_readonly("shared_memory", &PyClient::shared_memory)
      .def_property_readonly("tenant", &PyClient::tenant)
      .def("put", &PyClient::Put, py::arg("key"), py::arg("value"),
           py::arg("group_id") = py::none(), py::arg("tenant") = py::none(),
           py::arg("upsert") = false)
      .def("put_from", &PyClient::PutFrom, py::arg("key"), py::arg("source"),
           py::arg("length") = py::none(), py::arg("group_id") = py::none(),
           py::arg("tenant") = py::none(), py::arg("upsert") = false)
      .def("get", &PyClient::Get, py::arg("key"), py::arg("tenant") = py::none())
      .def("get_view", &PyClient::GetView, py::arg("key"), py::arg("tenant") = py::none())
      .def("get_into", &PyClient::GetInto, py::arg("key"), py::arg("target"),
           py::arg("length") = py::none(), py::arg("tenant") = py::none())
      .def("batch_put", &PyClient::BatchPut, py::arg("items"), py::arg("tenant") = py::none(),
           py::arg("upsert") = false)
      .def("batch_put_from", &PyClient::BatchPut, py::arg("items"), py::arg("tenant") = py::none(),
           py::arg("upsert") = false)
      .def("batch_get", &PyClient::BatchGet, py::arg("keys"), py::arg("tenant") = py::none())
      .def("batch_get_into", &PyClient::BatchGetInto, py::arg("keys"), py::arg("targets"),
           py::arg("tenant") = py::none(), py::arg("exact") = false)
      .def(
          "batch_put_parts",
          [](PyClient& c, const py::list& keys, const py::list& parts, const py::object& tenant,
             bool upsert) { return c.PutParts(keys, Parts(parts, false), tenant, upsert); },
          py::arg("keys"), py::arg("parts"), py::arg("tenant") = py::none(),
          py::arg("upsert") = false)
      .def(
          "batch_put_regions",
          [](PyClient& c, const py::list& keys, const std::vector<uintptr_t>& addresses,
             const std::vector<size_t>& lengths, const py::object& tenant, bool upsert) {
            return c.PutParts(keys, Parts(keys.size(), addresses, lengths), tenant, upsert);
          },
          py::arg("keys"), py::arg("addresses"), py::arg("lengths"), py::arg("tenant") = py::none(),
          py::arg("upsert") = false)
      .def(
          "batch_get_parts",
          [](PyClient& c, const py::list& keys, const py::list& parts, const py::object& tenant) {
            return c.GetParts(keys, Parts(parts, true), tenant);
          },
          py::arg("keys"), py::arg("parts"), py::arg("tenant") = py::none())
      .def(
          "batch_put_device",
          [](PyClient& c, const py::list& keys, const py::list& parts, const py::object& tenant,
             bool upsert) { return c.PutDevice(keys, DeviceParts(parts), tenant, upsert); },
          py::arg("keys"), py::arg("parts"), py::arg("tenant") = py::none(),
          py::arg("upsert") = false)
      .def(
          "batch_get_device",
          [](PyClient& c, const py::list& keys, const py::list& parts, const py::object& tenant) {
            return c.GetDevice(keys, DeviceParts(parts), tenant);
          },
          py::arg("keys"), py::arg("parts"), py::arg("tenant") = py::none())
      .def(
          "batch_get_regions",
          [](PyClient& c, const py::list& keys, const std::vector<uintptr_t>& addresses,
             const std::vector<size_t>& lengths, const py::object& tenant) {
            return c.GetParts(keys, Parts(keys.size(), addresses, lengths), tenant);
          },
          py::arg("keys"), py::arg("addresses"), py::arg("lengths"), py::arg("tenant") = py::none())
      .def("exists", &PyClient::Exists, py::arg("key"), py::arg("tenant") = py::none(),
           py::arg("local_only") = false)
      .def("batch_exists", &PyClient::BatchExists, py::arg("keys"), py::arg("tenant") = py::none(),
           py::arg("local_only") = false)
      .def("query", &PyClient::Query, py::arg("key"), py::arg("tenant") = py::none(),
           py::arg("local_only") = false)
      .def("batch_query", &PyClient::BatchQuery, py::arg("keys"), py::arg("tenant") = py::none(),
           py::arg("local_only") = false)
      .def("remove", &PyClient::Remove, py::arg("key"), py::arg("tenant") = py::none())
      .def("batch_remove", &PyClient::BatchRemove, py::arg("keys"), py::arg("tenant") = py::none())
      .def("remove_all", &PyClient::RemoveAll, py::arg("tenant") = py::none(),
           py::arg("force") = false)
      .def("list_keys", &PyClient::ListKeys, py::arg("prefix") = "", py::arg("limit") = 0,
           py::arg("tenant") = py::none());
}
