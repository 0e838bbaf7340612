// FileStore specifics: layout, file-system limits, bad directories.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/unit/bootstrap/store_fixture.h"

namespace tictac::bootstrap {
namespace {

using namespace std::chrono_literals;

TEST(FileStore, WritesOneFilePerKeyAndNoTemporaries) {
  testing::TempDir dir;
  auto store = FileStore::open(dir.path() + "/s");
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  ASSERT_TRUE((*store)->set_string("addr/0", "10.0.0.1:5").ok());
  ASSERT_TRUE((*store)->add("n", 3).ok());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/s")) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".lock", "k.addr%2F0", "k.n"}));
}

TEST(FileStore, KeyTooLongForAFileNameIsRefused) {
  testing::TempDir dir;
  auto store = FileStore::open(dir.path());
  ASSERT_TRUE(store.ok());
  const std::string slashes(100, '/');  // escapes to 300 bytes
  Status s = (*store)->set_string(slashes, "x");
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("file name"), std::string::npos) << s.message();
}

TEST(FileStore, UnusableDirectoryIsUnavailable) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/plain-file";
  std::ofstream(file) << "x";
  auto store = FileStore::open(file + "/sub");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::unavailable);
  EXPECT_NE(store.status().message().find("plain-file"), std::string::npos);
  EXPECT_EQ(FileStore::open("").status().code(), StatusCode::invalid_argument);
}

TEST(FileStore, OversizedFileIsReportedNotRead) {
  testing::TempDir dir;
  auto store = FileStore::open(dir.path());
  ASSERT_TRUE(store.ok());
  const std::string path = dir.path() + "/k.huge";
  { std::ofstream create(path); }
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(kMaxValueBytes + 1)), 0);  // sparse
  Result<Bytes> got = (*store)->get("huge", 10ms);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::protocol_error);
}

TEST(FileStore, LockHeldByAnotherDescriptorTimesOut) {
  testing::TempDir dir;
  FileStoreOptions options;
  options.lock_timeout = 20ms;
  auto store = FileStore::open(dir.path(), options);
  ASSERT_TRUE(store.ok());
  // Another holder of the directory lock (as a stuck peer process would be).
  const int fd = ::open((dir.path() + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  Result<std::int64_t> r = (*store)->add("n", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::timeout);
  EXPECT_NE(r.status().message().find(".lock"), std::string::npos);
  ::close(fd);  // released: works again
  EXPECT_TRUE((*store)->add("n", 1).ok());
}

}  // namespace
}  // namespace tictac::bootstrap
