// Worker leases against a real raylet: the raylet starts this very binary as a worker
// (single-binary mode), the "worker" registers with its startup token, the lease is
// granted, and the raylet notices the worker's death (SIGCHLD), lists infeasible
// requests in `manta status`, and takes its workers down with it.
//
// When started with MANTA_WORKER_MODE=1 this binary is the worker: it registers
// with the raylet named in its environment and then waits to be killed.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "cluster_harness.h"
#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/id.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/security.h"

namespace manta::testing {
namespace {

using Stub = rpc::NodeManagerWorkerService::Stub;

int RunAsWorker() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  // The raylet hands a worker its tokens on an inherited pipe, never in the environment.
  auto secrets = TakeInheritedSecrets();
  if (!secrets.ok() || !env(kClusterTokenEnv).empty() || !env("MANTA_WORKER_STARTUP_TOKEN").empty()) return 4;
  rpc::SetProcessCredentials(rpc::TokenCredentials((*secrets)[kClusterTokenEnv]));
  auto stub = rpc::NodeManagerWorkerService::NewStub(rpc::MakeChannel(env("MANTA_RAYLET_ADDRESS"), 64 << 20));
  rpc::RegisterWorkerRequest request;
  request.set_worker_type(rpc::WORKER);
  request.set_startup_token((*secrets)["MANTA_WORKER_STARTUP_TOKEN"]);
  auto worker_id = WorkerID::FromHex(env("MANTA_WORKER_ID"));
  auto job_id = JobID::FromHex(env("MANTA_JOB_ID"));
  if (!worker_id.ok() || !job_id.ok()) return 2;
  request.set_worker_id(worker_id->Binary());
  request.set_job_id(job_id->Binary());
  request.set_pid(getpid());
  request.mutable_address()->set_ip_address(env("MANTA_NODE_IP_ADDRESS"));
  request.mutable_address()->set_port(1);  // no server: nothing pushes tasks here
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  rpc::RegisterWorkerReply reply;
  grpc::Status s = stub->RegisterWorker(&ctx, request, &reply);
  if (!s.ok()) {
    std::cerr << "worker: RegisterWorker failed: " << s.error_message() << std::endl;
    return 3;
  }
  std::cout << "worker registered, store " << reply.object_store_socket() << std::endl;
  for (;;) pause();
}

grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

// The environment of a process, from /proc.
std::map<std::string, std::string> EnvironOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    std::string entry = raw.substr(start, end - start);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    start = end + 1;
  }
  return env;
}

class WorkerLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead({"--num-cpus", "2"});
    std::vector<rpc::NodeInfo> nodes = cluster_.AliveNodes();
    ASSERT_EQ(nodes.size(), 1u);
    node_ = nodes[0];
    raylet_address_ = node_.node_manager_address() + ":" + std::to_string(node_.node_manager_port());
    stub_ = rpc::NodeManagerWorkerService::NewStub(rpc::MakeChannel(raylet_address_, 64 << 20));

    // This process is the job's driver: it registers the job with the GCS, saying how
    // its workers start (the only place a raylet takes that from)...
    auto jobs = rpc::JobInfoGcsService::NewStub(rpc::MakeChannel(cluster_.gcs_address(), 64 << 20));
    rpc::AddJobRequest add;
    add.mutable_job_info()->set_job_id(job_id_.Binary());
    add.mutable_job_info()->mutable_config()->add_worker_command(SelfExecutablePath());
    (*add.mutable_job_info()->mutable_config()->mutable_worker_env())["WORKER_LEASE_TEST"] = "yes";
    {
      grpc::ClientContext ctx;
      rpc::AttachClusterToken(&ctx);
      rpc::AddJobReply added;
      ASSERT_TRUE(jobs->AddJob(WithDeadline(&ctx, 10), add, &added).ok());
    }
    // ...and with its raylet.
    rpc::RegisterWorkerRequest driver;
    driver.set_worker_type(rpc::DRIVER);
    driver.set_worker_id(driver_id_.Binary());
    driver.set_job_id(job_id_.Binary());
    driver.set_pid(getpid());
    driver.mutable_address()->set_ip_address("127.0.0.1");
    driver.mutable_address()->set_port(1);
    grpc::ClientContext ctx;
    rpc::AttachClusterToken(&ctx);
    rpc::RegisterWorkerReply reply;
    ASSERT_TRUE(stub_->RegisterWorker(WithDeadline(&ctx, 10), driver, &reply).ok());
    EXPECT_EQ(reply.node_id(), node_.node_id());
  }

  rpc::RequestWorkerLeaseRequest LeaseRequest(const std::map<std::string, double>& resources) {
    rpc::RequestWorkerLeaseRequest request;
    request.set_lease_request_id(LeaseID::FromRandom().Binary());
    request.set_job_id(job_id_.Binary());
    request.mutable_owner_address()->set_node_id(node_.node_id());
    request.mutable_owner_address()->set_worker_id(driver_id_.Binary());
    request.mutable_owner_address()->set_ip_address("127.0.0.1");
    for (const auto& [k, v] : resources) (*request.mutable_required_resources())[k] = v;
    return request;
  }

  rpc::RequestWorkerLeaseReply Lease(const std::map<std::string, double>& resources) {
    grpc::ClientContext ctx;
    rpc::AttachClusterToken(&ctx);
    rpc::RequestWorkerLeaseReply reply;
    grpc::Status s = stub_->RequestWorkerLease(WithDeadline(&ctx, 30), LeaseRequest(resources), &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(reply.lease_id().empty()) << reply.DebugString();
    return reply;
  }

  double AvailableCpu() {
    nlohmann::json status = cluster_.Status();
    for (const auto& n : status.value("nodes", nlohmann::json::array())) {
      if (n["state"] == "ALIVE") return n["resources_available"].value("CPU", -1.0);
    }
    return -1;
  }

  ClusterHarness cluster_;
  rpc::NodeInfo node_;
  std::string raylet_address_;
  std::unique_ptr<Stub> stub_;
  WorkerID driver_id_ = WorkerID::FromRandom();
  JobID job_id_ = JobID::FromInt(1);
};

TEST_F(WorkerLeaseTest, RayletStartsTheDriversBinaryAsAWorkerAndReleasesItsLeaseWhenItDies) {
  rpc::RequestWorkerLeaseReply lease = Lease({{"CPU", 1}});
  pid_t worker = lease.worker_pid();
  ASSERT_GT(worker, 0);
  EXPECT_TRUE(IsProcessAlive(worker));
  std::map<std::string, std::string> env = EnvironOf(worker);
  EXPECT_EQ(env["MANTA_WORKER_MODE"], "1");
  EXPECT_EQ(env["MANTA_RAYLET_ADDRESS"], raylet_address_);
  EXPECT_EQ(env["MANTA_NODE_ID"], NodeID::FromBinary(node_.node_id()).Hex());
  EXPECT_EQ(env["MANTA_GCS_ADDRESS"], cluster_.gcs_address());
  EXPECT_EQ(env["WORKER_LEASE_TEST"], "yes");
  EXPECT_EQ(lease.worker_address().worker_id(), WorkerID::FromHex(env["MANTA_WORKER_ID"])->Binary());
  EXPECT_TRUE(WaitFor([&] { return AvailableCpu() == 1; }, 10000));

  // Its stdout goes to <session>/logs/worker-<worker id>-<job id>.out (its stderr to .err).
  std::string log_name = "worker-" + env["MANTA_WORKER_ID"] + "-" + job_id_.Hex() + ".out";
  std::string log_path;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cluster_.temp_root())) {
    if (e.path().filename() == log_name) log_path = e.path().string();
  }
  ASSERT_FALSE(log_path.empty()) << log_name;
  EXPECT_EQ(std::filesystem::path(log_path).parent_path().filename(), "logs");
  EXPECT_TRUE(WaitFor([&] {
    std::ifstream in(log_path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.find("worker registered") != std::string::npos;
  }, 5000));

  ASSERT_TRUE(SignalProcess(worker, SIGKILL).ok());
  EXPECT_TRUE(WaitFor([&] { return AvailableCpu() == 2; }, 10000)) << "the dead worker's lease was not released";
}

TEST_F(WorkerLeaseTest, InfeasibleRequestIsShownByStatusUntilCancelled) {
  rpc::RequestWorkerLeaseRequest request = LeaseRequest({{"GPU", 1}});
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  rpc::RequestWorkerLeaseReply reply;
  std::atomic<bool> done{false};
  grpc::Status status;
  stub_->async()->RequestWorkerLease(WithDeadline(&ctx, 60), &request, &reply, [&](grpc::Status s) {
    status = s;
    done = true;
  });
  // Whatever happens below, the call must be over before its state goes away.
  struct Finally {
    grpc::ClientContext& ctx;
    std::atomic<bool>& done;
    ~Finally() {
      ctx.TryCancel();
      WaitFor([&] { return done.load(); }, 10000);
    }
  } finally{ctx, done};
  auto infeasible_listed = [&] {
    nlohmann::json s = cluster_.Status();
    for (const auto& n : s.value("nodes", nlohmann::json::array())) {
      for (const auto& shape : n.value("infeasible_shapes", nlohmann::json::array())) {
        if (shape == "GPU: 1") return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(WaitFor(infeasible_listed, 10000));
  CommandResult text = cluster_.Manta({"status", "--address", cluster_.gcs_address()});
  EXPECT_NE(text.output.find("infeasible: {GPU: 1}"), std::string::npos) << text.output;
  EXPECT_FALSE(done);

  rpc::CancelWorkerLeaseRequest cancel;
  cancel.set_lease_request_id(request.lease_request_id());
  grpc::ClientContext cancel_ctx;
  rpc::AttachClusterToken(&cancel_ctx);
  rpc::CancelWorkerLeaseReply cancel_reply;
  ASSERT_TRUE(stub_->CancelWorkerLease(WithDeadline(&cancel_ctx, 10), cancel, &cancel_reply).ok());
  EXPECT_TRUE(cancel_reply.success());
  ASSERT_TRUE(WaitFor([&] { return done.load(); }, 10000));
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(reply.canceled());
  EXPECT_TRUE(WaitFor([&] { return !infeasible_listed(); }, 10000));
}

TEST_F(WorkerLeaseTest, WorkersDieWithTheirRaylet) {
  rpc::RequestWorkerLeaseReply lease = Lease({{"CPU", 1}});
  pid_t worker = lease.worker_pid();
  ASSERT_GT(worker, 0);
  std::vector<pid_t> raylets = cluster_.Pids("raylet");
  ASSERT_EQ(raylets.size(), 1u);
  ASSERT_TRUE(SignalProcess(raylets[0], SIGKILL).ok());
  EXPECT_TRUE(WaitFor([&] { return !IsProcessAlive(worker); }, 10000));
}

}  // namespace
}  // namespace manta::testing

int main(int argc, char** argv) {
  const char* mode = std::getenv("MANTA_WORKER_MODE");
  if (mode != nullptr && std::string(mode) == "1") return manta::testing::RunAsWorker();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
