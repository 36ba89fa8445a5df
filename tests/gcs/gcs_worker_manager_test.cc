// GcsWorkerManager with a real GcsPublisher: a reported worker death is published on
// GCS_WORKER_DELTA_CHANNEL; malformed ids are rejected and publish nothing.
#include "src/gcs/gcs_worker_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/id.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using manta::JobID;
using manta::NodeID;
using manta::WorkerID;

using ::testing::IsEmpty;
using ::testing::SizeIs;

class GcsWorkerManagerTest : public ::testing::Test {
 protected:
  GcsWorkerManagerTest()
      : publisher_(GcsPublisher::Options(), clock_.AsFunction()),
        published_(publisher_, {rpc::GCS_WORKER_DELTA_CHANNEL}),
        manager_(publisher_) {}

  absl::Status Report(const rpc::WorkerDeltaData& failure) {
    rpc::ReportWorkerFailureRequest request;
    *request.mutable_worker_failure() = failure;
    rpc::ReportWorkerFailureReply reply;
    return CallHandler(loop_, manager_, &GcsWorkerManager::HandleReportWorkerFailure, request, &reply);
  }

  EventLoop loop_;
  FakeClock clock_;
  GcsPublisher publisher_;
  PublishedMessages published_;
  GcsWorkerManager manager_;
};

TEST_F(GcsWorkerManagerTest, ReportedDeathIsPublished) {
  rpc::WorkerDeltaData failure;
  WorkerID worker = WorkerID::FromRandom();
  failure.set_worker_id(worker.Binary());
  failure.set_node_id(NodeID::FromRandom().Binary());
  failure.set_job_id(JobID::FromInt(2).Binary());
  failure.set_exit_reason("killed by signal 9");
  ASSERT_THAT(Report(failure), IsOk());
  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_EQ(messages[0].channel_type(), rpc::GCS_WORKER_DELTA_CHANNEL);
  EXPECT_EQ(messages[0].key_id(), worker.Binary());
  EXPECT_EQ(messages[0].worker_delta_message().exit_reason(), "killed by signal 9");
}

rpc::WorkerDeltaData ValidFailure() {
  rpc::WorkerDeltaData failure;
  failure.set_worker_id(WorkerID::FromRandom().Binary());
  failure.set_node_id(NodeID::FromRandom().Binary());
  failure.set_job_id(JobID::FromInt(2).Binary());
  return failure;
}

TEST_F(GcsWorkerManagerTest, MalformedIdsAreRejected) {
  rpc::WorkerDeltaData bad_worker = ValidFailure();
  bad_worker.set_worker_id("short");
  EXPECT_EQ(Report(bad_worker).code(), absl::StatusCode::kInvalidArgument);
  rpc::WorkerDeltaData no_worker = ValidFailure();
  no_worker.clear_worker_id();
  EXPECT_EQ(Report(no_worker).code(), absl::StatusCode::kInvalidArgument);
  rpc::WorkerDeltaData bad_node = ValidFailure();
  bad_node.clear_node_id();
  EXPECT_EQ(Report(bad_node).code(), absl::StatusCode::kInvalidArgument);
  rpc::WorkerDeltaData bad_job = ValidFailure();
  bad_job.set_job_id("too long for a job id");
  EXPECT_EQ(Report(bad_job).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Report(rpc::WorkerDeltaData()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(published_.TakeNew(), IsEmpty());
  // A well-formed report still goes through afterwards.
  EXPECT_THAT(Report(ValidFailure()), IsOk());
  EXPECT_THAT(published_.TakeNew(), SizeIs(1));
}

}  // namespace
}  // namespace manta::gcs::testing
