// A real cluster on one machine: redis-server, manta_gcs and several raylets started
// through the `manta` CLI, with failures injected by kill -9.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "cluster_harness.h"
#include "protos/gcs.grpc.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/process.h"
#include "src/common/util.h"

namespace manta::testing {
namespace cluster_test {
namespace {

// Fast failure detection for tests: 200 ms period, 3 misses.
const char kFastHealth[] =
    R"({"health_check_period_ms": 200, "health_check_timeout_ms": 200, "health_check_failure_threshold": 3,)"
    R"( "health_check_initial_delay_ms": 0})";

std::unique_ptr<rpc::JobInfoGcsService::Stub> JobStub(const std::string& address) {
  // Fast-reconnecting channel: the GCS is killed and restarted under it.
  return rpc::JobInfoGcsService::NewStub(rpc::MakeChannel(address, 64 << 20));
}

template <typename Fn>
grpc::Status CallWithDeadline(Fn fn) {
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return fn(&ctx);
}

std::string AddJob(rpc::JobInfoGcsService::Stub& stub) {
  rpc::GetNextJobIDReply id;
  EXPECT_TRUE(CallWithDeadline([&](grpc::ClientContext* c) {
                return stub.GetNextJobID(c, rpc::GetNextJobIDRequest(), &id);
              }).ok());
  rpc::AddJobRequest add;
  add.mutable_job_info()->set_job_id(id.job_id());
  add.mutable_job_info()->set_ray_namespace("test");
  rpc::AddJobReply reply;
  EXPECT_TRUE(CallWithDeadline([&](grpc::ClientContext* c) { return stub.AddJob(c, add, &reply); }).ok());
  return id.job_id();
}

std::vector<std::string> JobIds(rpc::JobInfoGcsService::Stub& stub) {
  rpc::GetAllJobInfoReply all;
  EXPECT_TRUE(CallWithDeadline([&](grpc::ClientContext* c) {
                return stub.GetAllJobInfo(c, rpc::GetAllJobInfoRequest(), &all);
              }).ok());
  std::vector<std::string> ids;
  for (const auto& j : all.job_info_list()) ids.push_back(j.job_id());
  return ids;
}

TEST(ClusterTest, HeadAndTwoNodesAreAliveAndStopLeavesNothing) {
  ClusterHarness cluster;
  cluster.StartHead({"--num-cpus", "2", "--resources", R"({"special": 2})"});
  cluster.StartNode({"--num-cpus", "1"});
  cluster.StartNode({"--num-cpus", "1", "--num-gpus", "1"});
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 3);

  nlohmann::json status = cluster.Status();
  double cpus = 0, special = 0, gpus = 0;
  int heads = 0;
  for (const auto& n : status["nodes"]) {
    cpus += n["resources_total"].value("CPU", 0.0);
    special += n["resources_total"].value("special", 0.0);
    gpus += n["resources_total"].value("GPU", 0.0);
    heads += n["is_head"].get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(cpus, 4);
  EXPECT_EQ(special, 2);
  EXPECT_EQ(gpus, 1);
  EXPECT_EQ(heads, 1);

  // The human-readable status names every node.
  CommandResult text = cluster.Manta({"status"});
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("3 alive, 0 dead"), std::string::npos) << text.output;

  EXPECT_EQ(cluster.LivePids().size(), 6u);  // redis, gcs, dashboard, 3 raylets
  CommandResult stop = cluster.Manta({"stop"});
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_NE(stop.output.find("Stopped 6"), std::string::npos) << stop.output;
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(ClusterTest, KilledRayletIsDeclaredDeadWithinThreshold) {
  ClusterHarness cluster;
  cluster.StartHead({"--system-config", kFastHealth});
  cluster.StartNode();
  cluster.StartNode();
  ASSERT_EQ(cluster.CountNodes("ALIVE"), 3);

  std::vector<pid_t> raylets = cluster.Pids("raylet");
  ASSERT_EQ(raylets.size(), 3u);
  pid_t victim = raylets.back();
  int64_t killed_at = MonotonicMs();
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  // Threshold: 3 misses x 200 ms; allow generous slack for a loaded CI machine.
  EXPECT_TRUE(WaitFor([&] { return cluster.CountNodes("DEAD") == 1; }, 10000));
  int64_t took_ms = MonotonicMs() - killed_at;
  RecordProperty("dead_after_ms", std::to_string(took_ms));
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 2);
  nlohmann::json status = cluster.Status();  // keep the temporary alive
  for (const auto& n : status["nodes"]) {
    if (n["state"] == "DEAD") {
      EXPECT_NE(n["death_reason"].get<std::string>().find("health checks"), std::string::npos);
    }
  }
}

TEST(ClusterTest, GcsRestartKeepsNodesClusterIdAndJobs) {
  ClusterHarness cluster;
  std::string gcs = cluster.StartHead();
  cluster.StartNode();
  cluster.StartNode();
  ASSERT_EQ(cluster.CountNodes("ALIVE"), 3);
  std::string cluster_id = cluster.Status()["cluster_id"];
  auto stub = JobStub(gcs);
  std::string job1 = AddJob(*stub);
  std::string job2 = AddJob(*stub);
  EXPECT_EQ(JobID::FromBinary(job1).ToInt() + 1, JobID::FromBinary(job2).ToInt());

  // Restart on the same port against the same Redis.
  auto restarted = cluster.RestartGcs();
  ASSERT_TRUE(restarted.ok()) << restarted.status();

  EXPECT_TRUE(WaitFor([&] { return cluster.CountNodes("ALIVE") == 3; }, 10000));
  nlohmann::json status = cluster.Status();
  EXPECT_EQ(status["cluster_id"], cluster_id);
  EXPECT_EQ(status["nodes"].size(), 3u);  // raylets reconnected, none re-registered as new
  auto stub2 = JobStub(gcs);
  EXPECT_EQ(JobIds(*stub2), (std::vector<std::string>{job1, job2}));
  // The job counter continues instead of handing out an old id again.
  std::string job3 = AddJob(*stub2);
  EXPECT_EQ(JobID::FromBinary(job3).ToInt(), JobID::FromBinary(job2).ToInt() + 1);

  // Health checking resumed too: a raylet killed now is still detected.
  std::vector<pid_t> raylets = cluster.Pids("raylet");
  ASSERT_FALSE(raylets.empty());
  kill(raylets.back(), SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return cluster.CountNodes("DEAD") == 1; }, 20000));

  kill(*restarted, SIGKILL);
  WaitForExit(*restarted, 5000);
}

TEST(ClusterTest, RayletExitsWhenGcsStaysUnreachable) {
  ClusterHarness cluster;
  cluster.StartHead();
  std::vector<std::pair<std::string, std::string>> env = {{"MANTA_gcs_rpc_server_reconnect_timeout_s", "2"},
                                                          {"MANTA_raylet_gcs_check_period_ms", "200"}};
  CommandResult r = cluster.Manta({"start", "--address", cluster.gcs_address(), "--object-store-memory", "67108864"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<pid_t> raylets = cluster.Pids("raylet");
  ASSERT_EQ(raylets.size(), 2u);
  pid_t gcs = cluster.Pids("gcs").at(0);
  kill(gcs, SIGKILL);
  // The joined raylet gives up after ~2 s; the head's raylet uses the default 60 s.
  EXPECT_TRUE(WaitFor([&] { return cluster.Pids("raylet").size() == 1; }, 15000));
}

TEST(ClusterTest, HeadSystemConfigReachesJoinedNodes) {
  ClusterHarness cluster;
  // No environment overrides: the joined node can only learn these from the head.
  cluster.StartHead({"--system-config", R"({"gcs_rpc_server_reconnect_timeout_s": 2, "raylet_gcs_check_period_ms": 200})"});
  cluster.StartNode();
  ASSERT_EQ(cluster.Pids("raylet").size(), 2u);
  kill(cluster.Pids("gcs").at(0), SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return cluster.Pids("raylet").empty(); }, 15000));
}

TEST(ClusterTest, BlockingStartStopsItsProcessesOnSignal) {
  ClusterHarness cluster;
  ProcessOptions p;
  p.argv = {BinaryPath("manta"), "start", "--head", "--port", "0", "--block", "--object-store-memory", "67108864"};
  p.env["MANTA_TEMP_DIR"] = cluster.temp_root();
  p.output_file = cluster.temp_root() + "/block.out";
  auto cli = StartProcess(p);
  ASSERT_TRUE(cli.ok()) << cli.status();
  // redis, gcs, raylet, dashboard
  ASSERT_TRUE(WaitFor([&] { return cluster.LivePids().size() == 4; }, 20000)) << ReadFile(p.output_file).value_or("");
  EXPECT_TRUE(IsProcessAlive(*cli));  // still in the foreground
  kill(*cli, SIGTERM);
  EXPECT_TRUE(WaitForExit(*cli, 15000));
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(ClusterTest, SigtermedRayletLeavesCleanly) {
  ClusterHarness cluster;
  cluster.StartHead();
  cluster.StartNode();
  ASSERT_EQ(cluster.CountNodes("ALIVE"), 2);
  pid_t raylet = cluster.Pids("raylet").back();
  kill(raylet, SIGTERM);
  EXPECT_TRUE(WaitForExit(raylet, 5000));
  EXPECT_TRUE(WaitFor([&] { return cluster.CountNodes("DEAD") == 1; }, 5000));
  nlohmann::json status = cluster.Status();  // keep the temporary alive
  for (const auto& n : status["nodes"]) {
    if (n["state"] == "DEAD") {
      EXPECT_NE(n["death_reason"].get<std::string>().find("SIGTERM"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace cluster_test
}  // namespace manta::testing
