// A host of a four-host cluster dies (every process in it SIGKILLed at once) or is
// cut off by a partition (every packet to and from it dropped, silently) in the
// middle of work: the cluster declares it dead within its health-check window, and
// its work goes on elsewhere — tasks run again, the actor restarts, lost objects are
// rebuilt — within 2 s of that declaration. When a partition heals, the cut-off
// raylet learns it was declared dead and leaves with its workers, and a driver on
// that host gets a clear error instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <set>
#include <thread>

#include "src/common/util.h"
#include "tests/multihost/multihost_cluster.h"

namespace manta::testing {
namespace {

// Health checks every 500 ms with a 500 ms deadline, dead after 4 misses: a host
// that stops answering is declared dead within 4 x (500 + 500) ms.
constexpr char kFastHealthChecks[] =
    R"({"health_check_period_ms": 500, "health_check_timeout_ms": 500, "health_check_failure_threshold": 4,
        "health_check_initial_delay_ms": 500})";
constexpr int64_t kHealthWindowMs = 4 * (500 + 500);
// Failover target: work of a node declared dead runs again within this of the declaration.
constexpr int64_t kFailoverMs = 2000;

class HostFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MultiHostOptions options;
    options.system_config = kFastHealthChecks;
    auto started = MultiHostCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }

  // Starts the survive scenario on the head's host and waits until its work is
  // spread and running; returns the host its actor runs on (the victim).
  int StartWork(TestBed::Process* driver) {
    auto spawned = cluster_->SpawnDriver(0, {"survive", "12", "1048576", "6", "6000"});
    EXPECT_TRUE(spawned.ok()) << spawned.status();
    if (!spawned.ok()) return -1;
    *driver = *spawned;
    std::smatch m;
    bool ready = WaitFor(
        [&] {
          std::string out = cluster_->bed().OutputOf(*driver);
          return out.find("READY") != std::string::npos || out.find("ERROR") != std::string::npos;
        },
        120000);
    std::string out = cluster_->bed().OutputOf(*driver);
    EXPECT_TRUE(ready && out.find("READY") != std::string::npos) << out;
    EXPECT_TRUE(std::regex_search(out, m, std::regex("ACTOR_HOST (\\S+)"))) << out;
    for (int h = 1; h < 4; ++h) {
      if (m.size() > 1 && m[1] == cluster_->bed().Ip(h)) return h;
    }
    ADD_FAILURE() << "the actor is not on a worker host: " << out;
    return -1;
  }

  // Waits for the node at the victim's address to be DEAD; returns when (ms since
  // the epoch, as the GCS recorded it).
  int64_t WaitDead(int victim) {
    int64_t end_time_ms = 0;
    EXPECT_TRUE(WaitFor([&] { return cluster_->NodeState(cluster_->bed().Ip(victim), &end_time_ms) == "DEAD"; },
                        30000));
    return end_time_ms;
  }

  // What the survive driver reported; checks that every piece of work came out
  // right, that tasks running on the victim ran again elsewhere within kFailoverMs
  // of `dead_ms`, and that objects made there were made again elsewhere (when the
  // driver read them: lost objects are rebuilt on demand, as in Ray).
  void CheckSurvived(const nlohmann::json& result, int victim, int64_t dead_ms) {
    ASSERT_TRUE(result.is_object());
    const std::string lost_ip = cluster_->bed().Ip(victim);
    EXPECT_EQ(result["blobs_right"], result["blobs"]) << result.dump();
    EXPECT_GE(result["blobs"].get<int>(), 12);
    ASSERT_GE(result["long"].size(), 6u);
    for (const auto& r : result["long"]) EXPECT_EQ(r.get<std::string>().find(lost_ip), std::string::npos) << r;
    EXPECT_EQ(result["actor_host_before"], lost_ip);
    EXPECT_NE(result["actor_host_after"], lost_ip);
    EXPECT_EQ(result["actor_value_after"], 1) << "a restarted actor starts afresh";
    int moved = 0;
    int moved_running = 0;
    int rebuilt = 0;
    int64_t slowest_failover_ms = 0;
    for (const auto& [what, attempts] : result["attempts"].items()) {
      if (attempts.empty() || attempts[0]["host"] != lost_ip) continue;
      ++moved;
      if (what.rfind("long", 0) == 0) ++moved_running;
      if (what.rfind("blob", 0) == 0) ++rebuilt;
      // Ran again, elsewhere, soon after the node was declared dead.
      ASSERT_GE(attempts.size(), 2u) << what << ": " << attempts.dump();
      const auto& retry = attempts[attempts.size() - 1];
      EXPECT_NE(retry["host"], lost_ip) << what;
      if (what.rfind("long", 0) == 0) {
        const int64_t failover_ms = retry["at_ms"].get<int64_t>() - dead_ms;
        EXPECT_LE(failover_ms, kFailoverMs) << what << " ran again too late";
        slowest_failover_ms = std::max(slowest_failover_ms, failover_ms);
      }
    }
    EXPECT_GE(moved, 1) << "no work was on the victim: " << result.dump();
    EXPECT_GE(moved_running, 1) << "no task was running on the victim: " << result.dump();
    EXPECT_GE(rebuilt, 1) << "no object was made on the victim: " << result.dump();
    std::cout << moved_running << " task(s) running on the lost host ran again elsewhere, the last "
              << slowest_failover_ms << " ms after the node was declared dead" << std::endl;
  }

  std::unique_ptr<MultiHostCluster> cluster_;
};

TEST_F(HostFailureTest, HostDiesAndItsWorkGoesOnElsewhere) {
  TestBed::Process driver;
  int victim = StartWork(&driver);
  ASSERT_GT(victim, 0);
  const int64_t killed_ms = NowMs();
  ASSERT_TRUE(cluster_->bed().KillHost(victim).ok());
  const int64_t dead_ms = WaitDead(victim);
  EXPECT_LE(dead_ms - killed_ms, kHealthWindowMs + 1000) << "declared dead too late";
  std::cout << "declared dead " << dead_ms - killed_ms << " ms after the kill" << std::endl;
  CommandResult done = cluster_->bed().Wait(driver, 120000);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  ASSERT_TRUE(DriverResult(done.output).is_object()) << done.output;
  CheckSurvived(DriverResult(done.output), victim, dead_ms);
}

TEST_F(HostFailureTest, PartitionedHostIsDeclaredDeadItsWorkGoesOnAndItLeavesWhenTheCutHeals) {
  TestBed::Process driver;
  int victim = StartWork(&driver);
  ASSERT_GT(victim, 0);
  // A driver on the host about to be cut off, using the head's host across the cut.
  auto cut_driver = cluster_->SpawnDriver(victim, {"loop", "0", "300"});
  ASSERT_TRUE(cut_driver.ok());
  ASSERT_TRUE(WaitFor([&] { return cluster_->bed().OutputOf(*cut_driver).find("LOOP") != std::string::npos; },
                      60000))
      << cluster_->bed().OutputOf(*cut_driver);

  const int64_t cut_ms = NowMs();
  ASSERT_TRUE(cluster_->bed().Partition(victim).ok());
  const int64_t dead_ms = WaitDead(victim);
  EXPECT_LE(dead_ms - cut_ms, kHealthWindowMs + 1000) << "declared dead too late";
  std::cout << "declared dead " << dead_ms - cut_ms << " ms after the cut" << std::endl;
  CommandResult done = cluster_->bed().Wait(driver, 120000);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  ASSERT_TRUE(DriverResult(done.output).is_object()) << done.output;
  CheckSurvived(DriverResult(done.output), victim, dead_ms);

  // The cut heals: the raylet there learns it was declared dead and leaves, and its
  // workers with it.
  ASSERT_TRUE(cluster_->bed().Heal(victim).ok());
  const int64_t healed_ms = NowMs();
  EXPECT_TRUE(WaitFor(
      [&] {
        CommandResult r = cluster_->bed().Exec(victim, {"pgrep", "-c", "-f", "manta_raylet|multihost_driver"});
        // Only the cut-off driver may remain, on its way out.
        return r.output.find_first_not_of("0\n") == std::string::npos ||
               cluster_->bed().Exec(victim, {"pgrep", "-c", "manta_raylet"}).output == "0\n";
      },
      30000));
  CommandResult raylets = cluster_->bed().Exec(victim, {"pgrep", "-c", "manta_raylet"});
  EXPECT_EQ(raylets.output, "0\n") << "the cut-off raylet is still running";
  // The driver there ends with an error that says what happened, without hanging.
  CommandResult cut = cluster_->bed().Wait(*cut_driver, 60000);
  EXPECT_NE(cut.exit_code, -1) << "the driver on the cut-off host hangs: " << cut.output;
  EXPECT_NE(cut.exit_code, 0) << cut.output;
  nlohmann::json error = DriverResult(cut.output);
  ASSERT_TRUE(error.is_object()) << cut.output;
  EXPECT_NE(error["error"].get<std::string>().find("dead"), std::string::npos) << cut.output;
  std::cout << "after the heal, the cut-off host's processes left within " << NowMs() - healed_ms << " ms"
            << std::endl;
  // Nothing counted twice: three nodes alive, with their CPUs only.
  nlohmann::json status = cluster_->Status(0);
  int alive = 0;
  double cpus = 0;
  for (const auto& node : status["nodes"]) {
    if (node["state"] != "ALIVE") continue;
    ++alive;
    cpus += node["resources_total"].value("CPU", 0.0);
  }
  EXPECT_EQ(alive, 3) << status.dump();
  EXPECT_EQ(cpus, 6.0) << status.dump();
}

// The sort example in Manta's style (every bucket a return of its map, owned by the
// driver) loses a worker host once its maps are done, while the reduces read their
// columns from every host: the buckets that were there are made again from lineage
// (their maps run again), reduces that ran there run again, and the sorted result
// passes valsort's checks.
TEST_F(HostFailureTest, SortIsRightWhenAHostDiesWhileItsBucketsAreRead) {
  auto driver = cluster_->SpawnDriver(0, {"sort", std::to_string(512 << 20), "24", "12", "1"});
  ASSERT_TRUE(driver.ok()) << driver.status();
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string out = cluster_->bed().OutputOf(*driver);
        return out.find("MAPS_DONE 0") != std::string::npos || out.find("RESULT") != std::string::npos ||
               out.find("ERROR") != std::string::npos;
      },
      240000));
  ASSERT_NE(cluster_->bed().OutputOf(*driver).find("MAPS_DONE 0"), std::string::npos)
      << cluster_->bed().OutputOf(*driver);
  const int victim = 3;
  ASSERT_TRUE(cluster_->bed().KillHost(victim).ok());
  CommandResult done = cluster_->bed().Wait(*driver, 240000);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  const nlohmann::json result = DriverResult(done.output);
  ASSERT_TRUE(result.is_object()) << done.output;
  EXPECT_TRUE(result["right"].get<bool>()) << result.dump();
  EXPECT_EQ(result["runs"][0]["problem"], "") << result.dump();

  // Lineage did the work: maps ran again (the buckets they had left on the victim).
  CommandResult tasks = cluster_->Manta(
      0, {"list", "tasks", "--json", "--limit", "10000", "--address", cluster_->gcs_address()}, 30000);
  ASSERT_EQ(tasks.exit_code, 0) << tasks.output;
  const auto rows = nlohmann::json::parse(tasks.output, nullptr, false);
  ASSERT_TRUE(rows.is_array()) << tasks.output;
  int maps_again = 0, reduces_again = 0;
  for (const auto& row : rows) {
    if (row.value("attempt_number", 0) == 0) continue;
    const std::string name = row.value("name", "");
    maps_again += name.find("MapReturns") != std::string::npos;
    reduces_again += name.find("ReduceViews") != std::string::npos;
  }
  EXPECT_GE(maps_again, 1) << "no map ran again: nothing the sort needed was on the victim?";
  std::cout << "the sort took " << result["runs"][0]["seconds"] << " s; " << maps_again << " map(s) and "
            << reduces_again << " reduce(s) ran again" << std::endl;
}

}  // namespace
}  // namespace manta::testing
