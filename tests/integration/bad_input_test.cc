// Bad input from a peer on a real cluster: what a misbehaving or hostile process
// sends to Manta's ports gets an error and never crashes or wedges the receiver.
// This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <future>
#include <string>

#include "gtest/gtest.h"
#include "src/api/native_runtime.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/auth.h"
#include "src/common/security.h"
#include "src/core_worker/core_worker.h"
#include "src/task_channel/task_channel.h"
#include "test_util/test_util.h"

namespace bad_input_test {
namespace {

// Where the worker running this task takes pushes: "ip:port", its worker id, its pid.
struct WorkerEndpoint {
  std::string address;
  std::string worker_id;
  int pid = 0;
  MSGPACK_DEFINE(address, worker_id, pid);
};

WorkerEndpoint BadInputWhereAmI() {
  manta::core::CoreWorker* core = ray::internal::GetCoreWorkerForTesting();
  const manta::rpc::Address& a = core->address();
  return {a.ip_address() + ":" + std::to_string(a.task_port()), a.worker_id(), getpid()};
}
int Echo(int x) { return x; }
RAY_REMOTE(BadInputWhereAmI, Echo);

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ray::RayConfig config;
    config.head_args = {"--num-cpus=1", "--object-store-memory=100000000"};
    ray::Init(config);
  }
  static void TearDownTestSuite() { ray::Shutdown(); }

  // Sends `request` over a fresh task channel to `address`, shaking hands with
  // `token` (default: the cluster's, which this driver holds); returns the first reply.
  static absl::StatusOr<manta::rpc::PushTaskReply> Push(const std::string& address,
                                                        manta::rpc::PushTaskRequest request,
                                                        std::string token = manta::rpc::ProcessCredentials().token) {
    manta::EventLoop loop;
    std::thread thread([&] { loop.Run(); });
    auto channel = manta::core::MakeTcpTaskChannel(loop, address, 64 << 20, {token, manta::core::ChannelProtection::kMac});
    auto promise = std::make_shared<std::promise<absl::StatusOr<manta::rpc::PushTaskReply>>>();
    auto future = promise->get_future();
    auto answered = std::make_shared<std::atomic<bool>>(false);
    channel->Push(std::move(request), [promise, answered](const absl::Status& s, manta::rpc::PushTaskReply&& reply) {
      if (answered->exchange(true)) return;
      if (s.ok()) {
        promise->set_value(std::move(reply));
      } else {
        promise->set_value(s);
      }
    });
    absl::StatusOr<manta::rpc::PushTaskReply> result = absl::DeadlineExceededError("no reply within 10 s");
    if (future.wait_for(std::chrono::seconds(10)) == std::future_status::ready) result = future.get();
    channel->CancelAll();
    loop.Stop();
    thread.join();
    return result;
  }
};

TEST_F(BadInputTest, APushWithMalformedIdsIsRefusedAndTheWorkerLivesOn) {
  WorkerEndpoint worker = *ray::Task(BadInputWhereAmI).Remote().Get();
  manta::rpc::PushTaskRequest request;
  request.set_intended_worker_id(worker.worker_id);
  manta::rpc::TaskSpec* empty_id = request.add_tasks();  // no task id at all
  empty_id->set_function_name("Echo");
  manta::rpc::TaskSpec* short_id = request.add_tasks();
  short_id->set_task_id("short");
  short_id->set_function_name("Echo");
  manta::rpc::TaskSpec* bad_actor = request.add_tasks();
  bad_actor->set_task_id(std::string(manta::TaskID::kSize, 'x'));
  bad_actor->set_type(manta::rpc::ACTOR_TASK);
  bad_actor->mutable_actor_task()->set_actor_id("nope");
  auto reply = Push(worker.address, request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->results_size(), 3);
  for (const auto& result : reply->results()) {
    ASSERT_EQ(result.returns_size(), 1);
    EXPECT_EQ(result.returns(0).error().type(), manta::rpc::TASK_CANCELLED);
    EXPECT_FALSE(result.returns(0).error().message().empty());
  }
  EXPECT_EQ(kill(worker.pid, 0), 0) << "the worker died";
  EXPECT_EQ(*ray::Task(Echo).Remote(7).Get(), 7);
}

TEST_F(BadInputTest, AnOwnerWithoutTheClusterTokenGetsNothingRun) {
  WorkerEndpoint worker = *ray::Task(BadInputWhereAmI).Remote().Get();
  manta::rpc::PushTaskRequest request;
  request.set_intended_worker_id(worker.worker_id);
  manta::rpc::TaskSpec* spec = request.add_tasks();
  spec->set_task_id(std::string(manta::TaskID::kSize, 't'));
  spec->set_function_name("Echo");
  auto reply = Push(worker.address, request, manta::NewClusterToken());
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();
  EXPECT_EQ(kill(worker.pid, 0), 0) << "the worker died";
  EXPECT_EQ(*ray::Task(Echo).Remote(9).Get(), 9);
}

TEST_F(BadInputTest, APushForAnotherWorkerIsRefusedWithoutNamingThisOne) {
  WorkerEndpoint worker = *ray::Task(BadInputWhereAmI).Remote().Get();
  manta::rpc::PushTaskRequest request;  // no intended worker id: what a stranger sends
  auto reply = Push(worker.address, request);
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(std::string(reply.status().message()).find("meant for another worker"), std::string::npos)
      << reply.status();
  EXPECT_EQ(std::string(reply.status().message()).find(manta::WorkerID::FromBinary(worker.worker_id).Hex()),
            std::string::npos)
      << "the refusal names the worker: " << reply.status();
  EXPECT_EQ(*ray::Task(Echo).Remote(8).Get(), 8);
}

}  // namespace
}  // namespace bad_input_test
