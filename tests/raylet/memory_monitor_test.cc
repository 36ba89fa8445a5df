// ReadMemoryUsage over fake /proc and /sys trees (cgroup v1, v2, none, no limit), and
// MemoryMonitor's decisions with a fake reader: it asks for a kill only past the
// threshold, and not again until the killed worker is gone.
#include "src/raylet/memory_monitor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "src/common/util.h"
#include "tests/test_util/test_util.h"

namespace manta::raylet {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMeminfo =
    "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:   12000000 kB\nBuffers: 0 kB\n";

class ReadMemoryUsageTest : public ::testing::Test {
 protected:
  ReadMemoryUsageTest() : root_(fs::temp_directory_path() / ("memory_monitor_test_" + std::to_string(getpid()))) {
    fs::remove_all(root_);
    Write("proc/meminfo", kMeminfo);
  }
  ~ReadMemoryUsageTest() override { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories((root_ / path).parent_path());
    ASSERT_TRUE(WriteFileAtomic((root_ / path).string(), text).ok());
  }
  fs::path root_;
};

TEST_F(ReadMemoryUsageTest, WithoutACgroupLimitTheNodeCounts) {
  Write("proc/self/cgroup", "4:memory:/job\n0::/\n");
  Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "9223372036854771712\n");
  Write("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "100\n");
  auto usage = ReadMemoryUsage(root_.string());
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->limit_bytes, 16000000LL * 1024);
  EXPECT_EQ(usage->used_bytes, 4000000LL * 1024);
  EXPECT_EQ(usage->scope, "node");
  EXPECT_DOUBLE_EQ(usage->fraction(), 0.25);
}

TEST_F(ReadMemoryUsageTest, AV1CgroupWithALimitCountsWithoutInactiveFiles) {
  Write("proc/self/cgroup", "7:blkio:/\n4:memory:/job\n0::/\n");
  Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "1000000\n");
  Write("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "700000\n");
  Write("sys/fs/cgroup/memory/job/memory.stat", "cache 5\ninactive_file 1\ntotal_inactive_file 100000\n");
  auto usage = ReadMemoryUsage(root_.string());
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->limit_bytes, 1000000);
  EXPECT_EQ(usage->used_bytes, 600000);
  EXPECT_EQ(usage->scope, "memory cgroup /sys/fs/cgroup/memory/job");
}

TEST_F(ReadMemoryUsageTest, AV2CgroupWithALimit) {
  Write("proc/self/cgroup", "0::/user/job\n");
  Write("sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n");
  Write("sys/fs/cgroup/user/job/memory.max", "2000000\n");
  Write("sys/fs/cgroup/user/job/memory.current", "1500000\n");
  Write("sys/fs/cgroup/user/job/memory.stat", "anon 1\ninactive_file 500000\n");
  auto usage = ReadMemoryUsage(root_.string());
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->limit_bytes, 2000000);
  EXPECT_EQ(usage->used_bytes, 1000000);
  EXPECT_DOUBLE_EQ(usage->fraction(), 0.5);
}

TEST_F(ReadMemoryUsageTest, AV2CgroupWithoutALimitAndAPathNotMountedFallBackToTheNode) {
  Write("proc/self/cgroup", "0::/elsewhere\n");
  Write("sys/fs/cgroup/cgroup.controllers", "memory\n");
  Write("sys/fs/cgroup/memory.max", "max\n");  // the mount's root (a cgroup namespace)
  Write("sys/fs/cgroup/memory.current", "5\n");
  auto usage = ReadMemoryUsage(root_.string());
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->scope, "node");
}

TEST_F(ReadMemoryUsageTest, AMalformedMeminfoIsAnError) {
  Write("proc/meminfo", "MemTotal: lots\n");
  auto usage = ReadMemoryUsage(root_.string());
  EXPECT_FALSE(usage.ok());
}

TEST_F(ReadMemoryUsageTest, TheRealMachineReads) {
  auto usage = ReadMemoryUsage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_GT(usage->limit_bytes, 0);
  EXPECT_GT(usage->used_bytes, 0);
  EXPECT_LE(usage->used_bytes, usage->limit_bytes);
}

class MemoryMonitorTest : public ::testing::Test {
 protected:
  std::unique_ptr<MemoryMonitor> Make(double threshold) {
    return std::make_unique<MemoryMonitor>(
        loop_, threshold, /*refresh_ms=*/0,
        [this](const MemoryUsage& usage, double t) {
          kills_.push_back(usage.ToString());
          threshold_seen_ = t;
          return next_pid_;
        },
        [this]() -> absl::StatusOr<MemoryUsage> {
          MemoryUsage u;
          u.used_bytes = used_;
          u.limit_bytes = 1000;
          u.scope = "node";
          return u;
        });
  }
  EventLoop loop_;
  int64_t used_ = 0;
  pid_t next_pid_ = 0;
  double threshold_seen_ = 0;
  std::vector<std::string> kills_;
};

TEST_F(MemoryMonitorTest, KillsOnlyPastTheThreshold) {
  auto monitor = Make(0.9);
  used_ = 900;
  monitor->Check();
  EXPECT_TRUE(kills_.empty());
  used_ = 901;
  monitor->Check();
  ASSERT_EQ(kills_.size(), 1u);
  EXPECT_EQ(kills_[0], "0.00 GB of 0.00 GB (0.90) in node");
}

TEST_F(MemoryMonitorTest, WaitsForTheKilledWorkerToBeGoneBeforeKillingAnother) {
  auto monitor = Make(0.5);
  used_ = 800;
  // A child that lives until we reap it stands for the killed worker.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  next_pid_ = child;
  monitor->Check();
  ASSERT_EQ(kills_.size(), 1u);
  monitor->Check();
  EXPECT_EQ(kills_.size(), 1u) << "asked again while the first was alive";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  next_pid_ = 0;  // nothing left to kill
  monitor->Check();
  EXPECT_EQ(kills_.size(), 2u);
  monitor->Check();
  EXPECT_EQ(kills_.size(), 3u) << "nothing was killed: it keeps asking";
}

}  // namespace
}  // namespace manta::raylet
