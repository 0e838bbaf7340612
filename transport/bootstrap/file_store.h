// FileStore: a Store in a directory that all peers can see (one machine, or a shared file system
// with POSIX rename and flock semantics, e.g. a local disk or /dev/shm; not NFS).
//
// Layout: each key is one file "k.<escaped key>" (bytes outside [A-Za-z0-9._-] become %XX);
// set() writes a temporary ".tmp.<pid>.<n>" file and rename()s it into place, so a reader sees
// either no file or a complete value. set() and add() hold an flock() on "<dir>/.lock" (taken
// with LOCK_NB and retried with backoff up to `lock_timeout`, so a stuck peer gives a timeout,
// not a hang); the kernel releases it if its holder dies. get()/wait() poll with backoff from
// 1 ms up to `max_poll_interval`.
//
// Thread safety: safe across threads and across processes. Escaped names longer than 250 bytes
// are refused with invalid_argument (a file-system limit). Files are not fsync()ed: the store
// survives a crashed process, not a crashed machine. The directory is never cleaned up by the
// store; the caller removes it (temporary files of a killed writer may remain there).
#pragma once

#include <memory>
#include <string>

#include "transport/bootstrap/store.h"

namespace tictac::bootstrap {

struct FileStoreOptions {
  Millis lock_timeout{10000};
  Millis max_poll_interval{20};
};

class FileStore final : public Store {
 public:
  // Creates `dir` (and its parents) when missing. unavailable when it cannot be created or is
  // not a writable directory.
  static Result<std::unique_ptr<FileStore>> open(std::string dir, FileStoreOptions options = {});

  Status set(std::string_view key, std::span<const std::uint8_t> value) override;
  Result<Bytes> get(std::string_view key, Millis timeout) override;
  Status wait(const std::vector<std::string>& keys, Millis timeout) override;
  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override;

  const std::string& dir() const { return dir_; }

 private:
  FileStore(std::string dir, FileStoreOptions options) : dir_(std::move(dir)), options_(options) {}

  Result<std::string> path_for(std::string_view key) const;
  // Reads the value stored at `path`: found=false when the file does not exist yet; a non-ok
  // Status only for real I/O failures or a corrupt (oversized) file.
  Status read_value(const std::string& path, bool& found, Bytes& out) const;
  Status write_value(const std::string& path, std::span<const std::uint8_t> value) const;

  std::string dir_;
  FileStoreOptions options_;
};

}  // namespace tictac::bootstrap
