// The raylet's memory monitor on a real private cluster, kept safe by a memory
// cgroup of 1.5 GiB that this test makes and joins before it starts the cluster
// (root; cgroup v1 or v2): with memory_usage_threshold 0.5 the monitor kills a
// task's worker that allocates past 0.75 GiB long before the kernel's OOM killer
// would act at 1.5 GiB; the task is retried under its max_retries and then fails
// with OUT_OF_MEMORY (a RayException naming the task, the use and the threshold);
// the raylet, GCS and store live on. This binary is also its own worker.
#include <ray/api.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace memory_monitor_test {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kCgroupBytes = int64_t{1536} << 20;

// Allocates and touches `mb` MiB, 32 MiB at a time, a little slower than the
// monitor looks (every 50 ms), and returns how much it held.
int Hog(int mb) {
  std::vector<std::unique_ptr<char[]>> chunks;
  for (int held = 0; held < mb; held += 32) {
    chunks.emplace_back(new char[32 << 20]);
    std::memset(chunks.back().get(), 1, 32 << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  return static_cast<int>(chunks.size()) * 32;
}

// Hogs on its first run only (it leaves `marker` behind), then returns 7.
int HogOnce(std::string marker) {
  if (fs::exists(marker)) return 7;
  std::ofstream(marker) << "ran";
  return Hog(1200);
}

int Seven() { return 7; }

RAY_REMOTE(Hog, HogOnce, Seven);

// A memory cgroup of its own: v1 (memory controller hierarchy) or v2 (unified).
class Cgroup {
 public:
  absl::Status Make() {
    std::string name = "manta_memory_monitor_test_" + std::to_string(getpid());
    if (fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
      parent_ = "/sys/fs/cgroup/memory";
      limit_file_ = "memory.limit_in_bytes";
    } else if (fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
      parent_ = "/sys/fs/cgroup";
      limit_file_ = "memory.max";
    } else {
      return absl::FailedPreconditionError("no memory cgroup hierarchy under /sys/fs/cgroup");
    }
    dir_ = parent_ + "/" + name;
    std::error_code ec;
    if (!fs::create_directory(dir_, ec)) return absl::InternalError("cannot make " + dir_ + ": " + ec.message());
    // cgroup files are written in place (no temporary file and rename).
    std::ofstream limit(dir_ + "/" + limit_file_);
    limit << kCgroupBytes << "\n";
    limit.flush();
    if (!limit) return absl::InternalError("cannot set " + dir_ + "/" + limit_file_);
    return Join(dir_);
  }
  // Leaves it (back to the parent) and removes it once the cluster is gone.
  void Remove() {
    if (dir_.empty()) return;
    Join(parent_).IgnoreError();
    manta::testing::WaitFor([&] { return rmdir(dir_.c_str()) == 0 || errno == ENOENT; }, 10000);
  }

 private:
  static absl::Status Join(const std::string& dir) {
    std::ofstream procs(dir + "/cgroup.procs");
    procs << getpid() << "\n";
    procs.flush();
    return procs ? absl::OkStatus() : absl::InternalError("cannot join cgroup " + dir);
  }
  std::string parent_, limit_file_, dir_;
};

Cgroup* cgroup = nullptr;

class MemoryMonitorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cgroup = new Cgroup;
    absl::Status made = cgroup->Make();
    ASSERT_TRUE(made.ok()) << "this test needs root and a memory cgroup: " << made;
    // The cluster's processes read these (MANTA_<config name>).
    setenv("MANTA_memory_usage_threshold", "0.5", 1);
    setenv("MANTA_memory_monitor_refresh_ms", "50", 1);
    ray::RayConfig config;
    config.head_args = {"--num-cpus=1", "--object-store-memory=67108864"};
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    cgroup->Remove();
    delete cgroup;
  }
};

TEST_F(MemoryMonitorTest, ATaskPastTheThresholdIsKilledRetriedAndFailsWithOutOfMemory) {
  auto start = std::chrono::steady_clock::now();
  auto hog = ray::Task(Hog).SetMaxRetries(1).Remote(1400);
  try {
    int held = *hog.Get();
    FAIL() << "the task held " << held << " MiB in a 1536 MiB cgroup with a threshold of half";
  } catch (const ray::internal::RayException& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("Hog"), std::string::npos) << message;
    EXPECT_NE(message.find("memory_usage_threshold 0.50"), std::string::npos) << message;
    EXPECT_NE(message.find("memory cgroup"), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  // The cluster lives on.
  EXPECT_EQ(*ray::Task(Seven).Remote().Get(), 7);
}

TEST_F(MemoryMonitorTest, ATaskKilledOnceIsRetriedAndSucceeds) {
  std::string marker = fs::temp_directory_path() / ("manta_hog_once_" + std::to_string(getpid()));
  fs::remove(marker);
  EXPECT_EQ(*ray::Task(HogOnce).SetMaxRetries(2).Remote(marker).Get(), 7);
  EXPECT_TRUE(fs::exists(marker));
  fs::remove(marker);
}

}  // namespace
}  // namespace memory_monitor_test
