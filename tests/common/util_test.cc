// Tests of the small helpers in src/common/util.h.
#include "src/common/util.h"

#include <limits>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "test_util/test_util.h"

namespace manta {
namespace {

using ::manta::testing::TempDir;

TEST(UtilTest, CheckedArithmeticOnPeerSizes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t sum = -1;
  EXPECT_TRUE(CheckedAdd(3, 4, &sum));
  EXPECT_EQ(sum, 7);
  EXPECT_FALSE(CheckedAdd(kMax, 1, &sum));
  EXPECT_FALSE(CheckedAdd(kMax - 62, kMax - 62, &sum));
  EXPECT_FALSE(CheckedAdd(-1, 5, &sum));
  EXPECT_TRUE(RangeWithin(0, 10, 10));
  EXPECT_TRUE(RangeWithin(10, 0, 10));
  EXPECT_FALSE(RangeWithin(5, 6, 10));
  EXPECT_FALSE(RangeWithin(kMax - 1, 2, 10));  // offset + length would overflow
  EXPECT_FALSE(RangeWithin(1, kMax, 10));
  EXPECT_FALSE(RangeWithin(-1, 1, 10));
  EXPECT_FALSE(RangeWithin(0, -1, 10));
}

TEST(UtilTest, ParseHostPortGood) {
  absl::StatusOr<HostPort> hp = ParseHostPort("127.0.0.1:6379");
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 6379);
  EXPECT_EQ(hp->ToString(), "127.0.0.1:6379");

  absl::StatusOr<HostPort> named = ParseHostPort("head-node.example:1");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->host, "head-node.example");
  EXPECT_EQ(named->port, 1);

  absl::StatusOr<HostPort> max = ParseHostPort("localhost:65535");
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(max->port, 65535);
}

TEST(UtilTest, ParseHostPortBad) {
  for (const char* text : {"", "127.0.0.1", ":6379", "host:", "host:port", "host:0", "host:65536", "host:-1",
                           "host:12x"}) {
    absl::StatusOr<HostPort> hp = ParseHostPort(text);
    ASSERT_FALSE(hp.ok()) << text;
    EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(hp.status().message().find(std::string("'") + text + "'"), std::string::npos) << hp.status();
  }
}

TEST(UtilTest, WriteFileAtomicThenReadFile) {
  TempDir dir;
  std::string path = dir.path() + "/ready";
  ASSERT_TRUE(WriteFileAtomic(path, "1234\n").ok());
  EXPECT_EQ(ReadFile(path).value_or("?"), "1234\n");
  // Overwrites, and leaves no temp file behind.
  std::string binary("a\0b", 3);
  ASSERT_TRUE(WriteFileAtomic(path, binary).ok());
  EXPECT_EQ(ReadFile(path).value_or("?"), binary);
  ASSERT_TRUE(WriteFileAtomic(path, "").ok());
  EXPECT_EQ(ReadFile(path).value_or("?"), "");
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(UtilTest, WriteFileAtomicIntoMissingDirectoryFails) {
  TempDir dir;
  absl::Status s = WriteFileAtomic(dir.path() + "/no/such/dir/file", "x");
  EXPECT_FALSE(s.ok());
}

TEST(UtilTest, WriteFileAtomicFromConcurrentThreads) {
  // Writers of the same path from several threads of one process (the header promises
  // thread safety): every write succeeds and the file ends whole, never mixed.
  TempDir dir;
  std::string path = dir.path() + "/shared";
  const std::string a(64 * 1024, 'a');
  const std::string b(64 * 1024, 'b');
  std::atomic<int> failures{0};
  auto writer = [&](const std::string& contents) {
    for (int i = 0; i < 50; ++i) {
      if (!WriteFileAtomic(path, contents).ok()) ++failures;
    }
  };
  std::thread ta(writer, std::cref(a));
  std::thread tb(writer, std::cref(b));
  ta.join();
  tb.join();
  EXPECT_EQ(failures.load(), 0);
  std::string result = ReadFile(path).value_or("");
  EXPECT_TRUE(result == a || result == b) << "mixed or partial file of " << result.size() << " bytes";
}

TEST(UtilTest, ReadMissingFileIsNotFound) {
  TempDir dir;
  absl::StatusOr<std::string> contents = ReadFile(dir.path() + "/missing");
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
}

TEST(UtilTest, PickFreePortReturnsABindablePort) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
  EXPECT_FALSE(IsPortOpen("127.0.0.1", *port));

  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << "port " << *port;
  EXPECT_EQ(listen(fd, 1), 0);
  EXPECT_TRUE(IsPortOpen("127.0.0.1", *port));
  EXPECT_TRUE(IsPortOpen("localhost", *port));
  close(fd);
}

TEST(UtilTest, IsPortOpenRejectsBadHosts) { EXPECT_FALSE(IsPortOpen("not an address", 80)); }

TEST(UtilTest, ClocksAdvance) {
  int64_t wall = NowMs();
  EXPECT_GT(wall, 1'600'000'000'000);  // after 2020
  int64_t mono = MonotonicMs();
  EXPECT_GE(MonotonicMs(), mono);
}

}  // namespace
}  // namespace manta
