#include "transport/bootstrap/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

namespace tictac::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxNameBytes = 250;

std::string escape_key(std::string_view key) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = "k.";
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (plain) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// Closes the descriptor it owns.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// An exclusive flock() on the store's lock file, released when destroyed.
class DirLock {
 public:
  static Status acquire(const std::string& dir, Millis timeout, std::unique_ptr<DirLock>& out) {
    const std::string path = dir + "/.lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return errno_status(StatusCode::unavailable, "file store: open " + path, "open", errno);
    auto lock = std::unique_ptr<DirLock>(new DirLock(fd));
    const auto deadline = Clock::now() + timeout;
    auto backoff = std::chrono::microseconds(100);
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        return errno_status(StatusCode::unavailable, "file store: flock " + path, "flock", errno);
      }
      if (Clock::now() >= deadline) {
        return Status(StatusCode::timeout, "file store: could not lock " + path + " within " +
                                               std::to_string(timeout.count()) +
                                               " ms; another process holds it (stuck peer?)");
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::microseconds(5000));
    }
    out = std::move(lock);
    return Status::Ok();
  }
  ~DirLock() { ::close(fd_); }  // closing the descriptor releases the flock
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace

Result<std::unique_ptr<FileStore>> FileStore::open(std::string dir, FileStoreOptions options) {
  if (dir.empty()) return invalid_argument("file store: directory path is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status(StatusCode::unavailable,
                  "file store: cannot create directory " + dir + ": " + ec.message(), "mkdir");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return errno_status(StatusCode::unavailable, "file store: directory " + dir + " is not writable",
                        "access", errno);
  }
  return std::unique_ptr<FileStore>(new FileStore(std::move(dir), options));
}

Result<std::string> FileStore::path_for(std::string_view key) const {
  TICTAC_RETURN_IF_ERROR(validate_key(key));
  std::string name = escape_key(key);
  if (name.size() > kMaxNameBytes) {
    return invalid_argument("file store: key '" + printable_key(key) + "' escapes to a " +
                            std::to_string(name.size()) + "-byte file name, more than " +
                            std::to_string(kMaxNameBytes) + "; use a shorter key");
  }
  return dir_ + "/" + name;
}

Status FileStore::read_value(const std::string& path, bool& found, Bytes& out) const {
  found = false;
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) {
    if (errno == ENOENT) return Status::Ok();
    return errno_status(StatusCode::unavailable, "file store: open " + path, "open", errno);
  }
  Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_status(StatusCode::unavailable, "file store: fstat " + path, "fstat", errno);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size > kMaxValueBytes) {
    return Status(StatusCode::protocol_error, "file store: " + path + " holds " + std::to_string(size) +
                                                  " bytes, more than any value can be; not a store file?");
  }
  out.assign(size, 0);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd.get(), out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_status(StatusCode::unavailable, "file store: read " + path, "read", errno);
    if (n == 0) break;  // files are replaced, never truncated in place; a short file is a bug
    done += static_cast<std::size_t>(n);
  }
  if (done != size) {
    return internal_error("file store: " + path + " shrank while being read");
  }
  found = true;
  return Status::Ok();
}

Status FileStore::write_value(const std::string& path, std::span<const std::uint8_t> value) const {
  static std::atomic<std::uint64_t> counter{0};
  const std::string tmp = dir_ + "/.tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  {
    const int raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (raw < 0) return errno_status(StatusCode::unavailable, "file store: create " + tmp, "open", errno);
    Fd fd(raw);
    std::size_t done = 0;
    while (done < value.size()) {
      const ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return errno_status(StatusCode::unavailable, "file store: write " + tmp, "write", err);
      }
      done += static_cast<std::size_t>(n);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return errno_status(StatusCode::unavailable, "file store: rename to " + path, "rename", err);
  }
  return Status::Ok();
}

Status FileStore::set(std::string_view key, std::span<const std::uint8_t> value) {
  Result<std::string> path = path_for(key);
  if (!path.ok()) return path.status();
  TICTAC_RETURN_IF_ERROR(validate_value_size(value.size()));
  std::unique_ptr<DirLock> lock;
  TICTAC_RETURN_IF_ERROR(DirLock::acquire(dir_, options_.lock_timeout, lock));
  return write_value(*path, value);
}

Result<Bytes> FileStore::get(std::string_view key, Millis timeout) {
  Result<std::string> path = path_for(key);
  if (!path.ok()) return path.status();
  timeout = clamp_timeout(timeout);
  const auto deadline = Clock::now() + timeout;
  auto backoff = Millis(1);
  for (;;) {
    bool found = false;
    Bytes value;
    TICTAC_RETURN_IF_ERROR(read_value(*path, found, value));
    if (found) return value;
    const auto now = Clock::now();
    if (now >= deadline) return missing_keys_timeout("file store get in " + dir_, timeout, {std::string(key)});
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, options_.max_poll_interval);
  }
}

Status FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  TICTAC_RETURN_IF_ERROR(validate_wait_keys(keys));
  std::vector<std::string> paths;
  for (const std::string& key : keys) {
    Result<std::string> path = path_for(key);
    if (!path.ok()) return path.status();
    paths.push_back(*path);
  }
  timeout = clamp_timeout(timeout);
  const auto deadline = Clock::now() + timeout;
  auto backoff = Millis(1);
  std::vector<bool> seen(keys.size(), false);  // keys are never deleted: check each once
  for (;;) {
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (seen[i]) continue;
      struct stat st {};
      if (::stat(paths[i].c_str(), &st) == 0) {
        seen[i] = true;
      } else if (errno == ENOENT) {
        missing.push_back(keys[i]);
      } else {
        return errno_status(StatusCode::unavailable, "file store: stat " + paths[i], "stat", errno);
      }
    }
    if (missing.empty()) return Status::Ok();
    const auto now = Clock::now();
    if (now >= deadline) return missing_keys_timeout("file store wait in " + dir_, timeout, missing);
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, options_.max_poll_interval);
  }
}

Result<std::int64_t> FileStore::add(std::string_view key, std::int64_t delta) {
  Result<std::string> path = path_for(key);
  if (!path.ok()) return path.status();
  std::unique_ptr<DirLock> lock;
  TICTAC_RETURN_IF_ERROR(DirLock::acquire(dir_, options_.lock_timeout, lock));
  bool found = false;
  Bytes value;
  TICTAC_RETURN_IF_ERROR(read_value(*path, found, value));
  std::int64_t current = 0;
  if (found) {
    Result<std::int64_t> parsed = parse_counter(key, value);
    if (!parsed.ok()) return parsed.status();
    current = *parsed;
  }
  Result<std::int64_t> sum = checked_add(key, current, delta);
  if (!sum.ok()) return sum.status();
  TICTAC_RETURN_IF_ERROR(write_value(*path, encode_counter(*sum)));
  return *sum;
}

}  // namespace tictac::bootstrap
