// Test support: one "store world" per implementation, so the same semantic tests run against
// InMemoryStore, FileStore and TcpStore. client() returns a Store for one more participant:
// the shared object (in-memory), a new FileStore on the same directory, or a new TCP client.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "transport/bootstrap/file_store.h"
#include "transport/bootstrap/in_memory_store.h"
#include "transport/bootstrap/tcp_store.h"
#include "transport/bootstrap/tcp_store_server.h"

namespace tictac::bootstrap::testing {

class StoreWorld {
 public:
  virtual ~StoreWorld() = default;
  virtual std::shared_ptr<Store> client() = 0;
};

class InMemoryWorld final : public StoreWorld {
 public:
  std::shared_ptr<Store> client() override { return store_; }

 private:
  std::shared_ptr<InMemoryStore> store_ = std::make_shared<InMemoryStore>();
};

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tictac-store-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class FileWorld final : public StoreWorld {
 public:
  std::shared_ptr<Store> client() override {
    auto s = FileStore::open(dir_.path() + "/store");
    return s.ok() ? std::shared_ptr<Store>(std::move(*s)) : nullptr;
  }
  const std::string& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
};

class TcpWorld final : public StoreWorld {
 public:
  TcpWorld() {
    auto s = TcpStoreServer::start();
    if (s.ok()) server_ = std::move(*s);
  }
  std::shared_ptr<Store> client() override {
    if (!server_) return nullptr;
    TcpStoreOptions options;
    options.connect_timeout = std::chrono::seconds(10);
    options.io_timeout = std::chrono::seconds(10);
    auto c = TcpStore::connect("127.0.0.1", server_->port(), options);
    return c.ok() ? std::shared_ptr<Store>(std::move(*c)) : nullptr;
  }
  TcpStoreServer* server() { return server_.get(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

}  // namespace tictac::bootstrap::testing
