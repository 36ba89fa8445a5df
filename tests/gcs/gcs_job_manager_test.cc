// GcsJobManager over an in-memory store and a real GcsPublisher: job ids from a
// durable counter (unique across GCS restarts), the "jobs" table, GCS_JOB_CHANNEL.
#include "src/gcs/gcs_job_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "src/gcs/in_memory_store_client.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;

rpc::JobInfo MakeJob(uint32_t id, const std::string& ns = "default") {
  rpc::JobInfo info;
  info.set_job_id(JobID::FromInt(id).Binary());
  info.set_ray_namespace(ns);
  info.set_driver_pid(4242);
  return info;
}

class GcsJobManagerTest : public ::testing::Test {
 protected:
  GcsJobManagerTest()
      : store_(loop_),
        publisher_(GcsPublisher::Options(), clock_.AsFunction()),
        published_(publisher_, {rpc::GCS_JOB_CHANNEL}),
        manager_(MakeManager()) {}

  std::unique_ptr<GcsJobManager> MakeManager() {
    return std::make_unique<GcsJobManager>(store_, publisher_, clock_.AsFunction());
  }

  absl::StatusOr<uint32_t> NextJobId() {
    rpc::GetNextJobIDReply reply;
    absl::Status s = CallHandler(loop_, *manager_, &GcsJobManager::HandleGetNextJobID, rpc::GetNextJobIDRequest(),
                                 &reply);
    if (!s.ok()) return s;
    auto id = JobID::FromBinaryChecked(reply.job_id());
    if (!id.ok()) return id.status();
    return id->ToInt();
  }
  absl::Status AddJob(const rpc::JobInfo& info) {
    rpc::AddJobRequest request;
    *request.mutable_job_info() = info;
    rpc::AddJobReply reply;
    return CallHandler(loop_, *manager_, &GcsJobManager::HandleAddJob, request, &reply);
  }
  absl::Status Finish(const std::string& job_id) {
    rpc::MarkJobFinishedRequest request;
    request.set_job_id(job_id);
    rpc::MarkJobFinishedReply reply;
    return CallHandler(loop_, *manager_, &GcsJobManager::HandleMarkJobFinished, request, &reply);
  }
  rpc::GetAllJobInfoReply GetAll() {
    rpc::GetAllJobInfoReply reply;
    EXPECT_THAT(CallHandler(loop_, *manager_, &GcsJobManager::HandleGetAllJobInfo, rpc::GetAllJobInfoRequest(),
                            &reply),
                IsOk());
    return reply;
  }
  std::optional<rpc::JobInfo> Stored(uint32_t id) {
    auto row = ReadRow(loop_, store_, kJobTable, JobID::FromInt(id).Binary());
    if (!row.has_value()) return std::nullopt;
    rpc::JobInfo info;
    EXPECT_TRUE(info.ParseFromString(*row));
    return info;
  }

  EventLoop loop_;
  FakeClock clock_;
  InMemoryStoreClient store_;
  GcsPublisher publisher_;
  PublishedMessages published_;
  std::unique_ptr<GcsJobManager> manager_;
};

TEST_F(GcsJobManagerTest, JobIdsCountUpFromOne) {
  EXPECT_THAT(NextJobId(), IsOkAndHolds(1u));
  EXPECT_THAT(NextJobId(), IsOkAndHolds(2u));
  EXPECT_THAT(NextJobId(), IsOkAndHolds(3u));
}

TEST_F(GcsJobManagerTest, JobIdsContinueAfterARestart) {
  ASSERT_THAT(NextJobId(), IsOkAndHolds(1u));
  ASSERT_THAT(NextJobId(), IsOkAndHolds(2u));
  manager_ = MakeManager();  // a new GCS over the same store
  manager_->Initialize(ReadTable(loop_, store_, kJobTable));
  EXPECT_THAT(NextJobId(), IsOkAndHolds(3u));
}

TEST_F(GcsJobManagerTest, CorruptCounterIsAnErrorNotAReusedId) {
  WriteRow(loop_, store_, kCounterTable, "job_id", "garbage");
  EXPECT_FALSE(NextJobId().ok());
}

TEST_F(GcsJobManagerTest, AddJobPersistsAndPublishes) {
  ASSERT_THAT(AddJob(MakeJob(1, "ns1")), IsOk());

  auto stored = Stored(1);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->ray_namespace(), "ns1");
  EXPECT_FALSE(stored->is_dead());
  EXPECT_EQ(stored->start_time_ms(), clock_.now_ms()) << "start time filled in when absent";

  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_EQ(messages[0].channel_type(), rpc::GCS_JOB_CHANNEL);
  EXPECT_EQ(messages[0].key_id(), JobID::FromInt(1).Binary());
  EXPECT_EQ(messages[0].job_message().ray_namespace(), "ns1");
}

TEST_F(GcsJobManagerTest, AddJobWithBadIdIsInvalidArgument) {
  rpc::JobInfo info = MakeJob(1);
  info.set_job_id("toolong");
  EXPECT_THAT(AddJob(info), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ReadTable(loop_, store_, kJobTable), IsEmpty());
}

TEST_F(GcsJobManagerTest, MarkJobFinishedPersistsAndPublishesOnce) {
  ASSERT_THAT(AddJob(MakeJob(7)), IsOk());
  published_.TakeNew();
  clock_.Advance(1234);

  ASSERT_THAT(Finish(JobID::FromInt(7).Binary()), IsOk());
  auto stored = Stored(7);
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(stored->is_dead());
  EXPECT_EQ(stored->end_time_ms(), clock_.now_ms());
  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_TRUE(messages[0].job_message().is_dead());

  clock_.Advance(1);
  ASSERT_THAT(Finish(JobID::FromInt(7).Binary()), IsOk()) << "finishing twice is harmless";
  EXPECT_THAT(published_.TakeNew(), IsEmpty());
  EXPECT_EQ(Stored(7)->end_time_ms(), clock_.now_ms() - 1);
}

TEST_F(GcsJobManagerTest, MarkJobFinishedOfUnknownOrMalformedIdFails) {
  EXPECT_THAT(Finish(JobID::FromInt(99).Binary()), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Finish("x"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(GcsJobManagerTest, GetAllJobInfoListsJobsInIdOrder) {
  ASSERT_THAT(AddJob(MakeJob(3)), IsOk());
  ASSERT_THAT(AddJob(MakeJob(1)), IsOk());
  ASSERT_THAT(AddJob(MakeJob(2)), IsOk());
  ASSERT_THAT(Finish(JobID::FromInt(2).Binary()), IsOk());

  auto all = GetAll();
  ASSERT_EQ(all.job_info_list_size(), 3);
  EXPECT_EQ(all.job_info_list(0).job_id(), JobID::FromInt(1).Binary());
  EXPECT_EQ(all.job_info_list(1).job_id(), JobID::FromInt(2).Binary());
  EXPECT_TRUE(all.job_info_list(1).is_dead());
  EXPECT_EQ(all.job_info_list(2).job_id(), JobID::FromInt(3).Binary());
}

TEST_F(GcsJobManagerTest, RestartedManagerRestoresJobsAndSkipsMalformedRows) {
  ASSERT_THAT(AddJob(MakeJob(1)), IsOk());
  ASSERT_THAT(AddJob(MakeJob(2)), IsOk());
  ASSERT_THAT(Finish(JobID::FromInt(2).Binary()), IsOk());
  WriteRow(loop_, store_, kJobTable, "not a job id", MakeJob(5).SerializeAsString());
  WriteRow(loop_, store_, kJobTable, JobID::FromInt(6).Binary(), std::string("\x0a\xff\xff", 3));
  // Parse as a JobInfo without a (matching) job id.
  WriteRow(loop_, store_, kJobTable, JobID::FromInt(8).Binary(), "");
  WriteRow(loop_, store_, kJobTable, JobID::FromInt(9).Binary(), MakeJob(10).SerializeAsString());

  manager_ = MakeManager();
  manager_->Initialize(ReadTable(loop_, store_, kJobTable));
  auto all = GetAll();
  ASSERT_EQ(all.job_info_list_size(), 2);
  EXPECT_FALSE(all.job_info_list(0).is_dead());
  EXPECT_TRUE(all.job_info_list(1).is_dead());
  // A restored job can still be finished.
  EXPECT_THAT(Finish(JobID::FromInt(1).Binary()), IsOk());
}

}  // namespace
}  // namespace manta::gcs::testing
