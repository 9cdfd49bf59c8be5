#include "meta/metadata_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace tierkv {
namespace {

// File format: "TKVMETA1", then for each entry u32 key length, key, u32 value
// length, value (little-endian).
constexpr std::string_view kMagic = "TKVMETA1";

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }

Status Errno(const std::string& what) {
  return Status(Code::kIoError, what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<FileMetadataStore>> FileMetadataStore::Open(const std::string& dir) {
  std::unique_ptr<FileMetadataStore> s(new FileMetadataStore(dir));
  if (dir.empty()) return s;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(Code::kIoError, "--data-dir " + dir + ": " + ec.message());
  const std::string path = dir + "/metadata.bin";
  std::ifstream in(path, std::ios::binary);
  if (!in) return s;  // nothing stored yet
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (content.substr(0, kMagic.size()) != kMagic) {
    return Status(Code::kProtocolError, path + " is not a tierkv metadata file");
  }
  size_t pos = kMagic.size();
  auto read = [&](std::string* out) {
    uint32_t n;
    if (content.size() - pos < 4) return false;
    std::memcpy(&n, content.data() + pos, 4);
    pos += 4;
    if (content.size() - pos < n) return false;
    out->assign(content, pos, n);
    pos += n;
    return true;
  };
  while (pos < content.size()) {
    std::string k, v;
    if (!read(&k) || !read(&v)) return Status(Code::kProtocolError, path + " is truncated");
    s->data_.emplace(std::move(k), std::move(v));
  }
  return s;
}

Status FileMetadataStore::Persist(const std::map<std::string, std::string, std::less<>>& data) {
  if (dir_.empty()) return Status::Ok();
  std::string content(kMagic);
  for (const auto& [k, v] : data) {
    PutU32(&content, static_cast<uint32_t>(k.size()));
    content += k;
    PutU32(&content, static_cast<uint32_t>(v.size()));
    content += v;
  }
  const std::string path = dir_ + "/metadata.bin";
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open " + tmp);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = write(fd, content.data() + done, content.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      Status st = Errno("write " + tmp);
      close(fd);
      return st;
    }
    done += static_cast<size_t>(w);
  }
  if (fsync(fd) != 0) {
    Status st = Errno("fsync " + tmp);
    close(fd);
    return st;
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename " + tmp);
  return Status::Ok();
}

Result<std::string> FileMetadataStore::Get(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return NotFound("metadata key '" + std::string(key) + "' not found");
  return it->second;
}

Status FileMetadataStore::Put(std::string_view key, std::string_view value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = data_;
  next[std::string(key)] = std::string(value);
  if (Status st = Persist(next); !st.ok()) return st;
  data_ = std::move(next);
  return Status::Ok();
}

Status FileMetadataStore::Delete(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return NotFound("metadata key '" + std::string(key) + "' not found");
  auto next = data_;
  next.erase(std::string(key));
  if (Status st = Persist(next); !st.ok()) return st;
  data_ = std::move(next);
  return Status::Ok();
}

}  // namespace tierkv
