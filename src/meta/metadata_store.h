// MetadataStore: the small key -> raw bytes store behind the REST contract's
// /metadata endpoints (no schema; values are stored as given).
//
// FileMetadataStore keeps everything in memory and, when given a directory,
// persists it to <dir>/metadata.bin after every change (written to a temporary
// file, fsynced and renamed over the old one, so a crash leaves either the old
// or the new content), and loads it at start. Cluster mode replaces it with an
// etcd-backed implementation.
//
// Thread-safety: all methods are thread-safe.
#ifndef TIERKV_META_METADATA_STORE_H_
#define TIERKV_META_METADATA_STORE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "tierkv/status.h"

namespace tierkv {

class MetadataStore {
 public:
  virtual ~MetadataStore() = default;
  // NOT_FOUND when absent.
  virtual Result<std::string> Get(std::string_view key) = 0;
  // IO_ERROR when persisting failed (the value is then not stored).
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  // NOT_FOUND when absent; IO_ERROR when persisting failed.
  virtual Status Delete(std::string_view key) = 0;
};

class FileMetadataStore : public MetadataStore {
 public:
  // `dir` empty: memory only. Otherwise loads <dir>/metadata.bin if present.
  // Errors: IO_ERROR (directory cannot be created, file unreadable),
  // PROTOCOL_ERROR (the file is corrupt).
  static Result<std::unique_ptr<FileMetadataStore>> Open(const std::string& dir);

  Result<std::string> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status Delete(std::string_view key) override;

 private:
  explicit FileMetadataStore(std::string dir) : dir_(std::move(dir)) {}
  Status Persist(const std::map<std::string, std::string, std::less<>>& data);  // mu_ held

  const std::string dir_;
  std::mutex mu_;
  std::map<std::string, std::string, std::less<>> data_;
};

}  // namespace tierkv

#endif  // TIERKV_META_METADATA_STORE_H_
