// PushBatch and PushProgress: what both task submitters share about one push.
#include "src/core_worker/push_batch.h"

#include "gtest/gtest.h"

namespace manta::core {
namespace {

rpc::TaskSpec Spec(uint64_t n, size_t arg_bytes = 0) {
  rpc::TaskSpec spec;
  spec.set_task_id(TaskID::ForNormalTask(JobID::FromInt(1), TaskID::ForDriver(JobID::FromInt(1)), n).Binary());
  if (arg_bytes > 0) spec.add_args()->set_data(std::string(arg_bytes, 'x'));
  return spec;
}

TEST(PushBatchTest, FillsUpToTheTaskAndByteLimitsAndRefusesWhatNeverFits) {
  PushBatch batch("worker", /*max_tasks=*/3, /*max_bytes=*/1000);
  rpc::TaskSpec huge = Spec(0, 2000);
  EXPECT_EQ(batch.TryAdd(huge), PushBatch::Added::kTooBig);
  EXPECT_TRUE(batch.empty());
  rpc::TaskSpec a = Spec(1, 600), b = Spec(2, 600), c = Spec(3, 10), d = Spec(4, 10), e = Spec(5, 10);
  EXPECT_EQ(batch.TryAdd(a), PushBatch::Added::kAdded);
  EXPECT_EQ(batch.TryAdd(b), PushBatch::Added::kFull);  // over the bytes with a
  EXPECT_EQ(batch.TryAdd(c), PushBatch::Added::kAdded);
  EXPECT_EQ(batch.TryAdd(d), PushBatch::Added::kAdded);
  EXPECT_EQ(batch.TryAdd(e), PushBatch::Added::kFull);  // three tasks
  rpc::PushTaskRequest request = batch.TakeRequest();
  EXPECT_EQ(request.intended_worker_id(), "worker");
  EXPECT_EQ(request.tasks_size(), 3);
  EXPECT_EQ(batch.progress()->size(), 3u);
  EXPECT_NE(TooBigForAPush(huge, "task f", 1000).message().find("over the limit of 1000"), std::string::npos);
}

TEST(PushBatchTest, ACopiedSpecStaysAsItIsAndThePushCarriesTheCaller) {
  rpc::Address caller;
  caller.set_ip_address("10.0.0.1");
  caller.set_port(4321);
  caller.set_worker_id(std::string(28, 'w'));
  const int64_t caller_bytes = 2 + static_cast<int64_t>(caller.ByteSizeLong());
  const rpc::TaskSpec a = Spec(1, 100);
  const int64_t a_bytes = static_cast<int64_t>(a.ByteSizeLong());
  // Room for `a` alone, but not with its caller.
  PushBatch tight("worker", 10, a_bytes + caller_bytes - 1);
  EXPECT_EQ(tight.TryAddCopy(a, caller), PushBatch::Added::kTooBig);
  PushBatch batch("worker", 10, 10000);
  EXPECT_EQ(batch.TryAddCopy(a, caller), PushBatch::Added::kAdded);
  EXPECT_EQ(a.ByteSizeLong(), static_cast<size_t>(a_bytes));  // untouched
  EXPECT_FALSE(a.has_caller_address());
  rpc::PushTaskRequest request = batch.TakeRequest();
  ASSERT_EQ(request.tasks_size(), 1);
  EXPECT_EQ(request.tasks(0).task_id(), a.task_id());
  EXPECT_EQ(request.tasks(0).caller_address().port(), 4321);
  EXPECT_EQ(static_cast<int64_t>(request.tasks(0).ByteSizeLong()), a_bytes + caller_bytes);
}

TEST(PushProgressTest, CountsResultsAndHandsBackWhatWasNeverAnswered) {
  PushProgress progress;
  for (int i = 0; i < 4; ++i) progress.Add(TaskID::FromRandom(), i);
  rpc::PushTaskReply reply;
  reply.add_results();
  std::vector<PushProgress::Task> missing;
  EXPECT_EQ(progress.OnReply(reply, &missing), 1);
  EXPECT_TRUE(missing.empty());
  reply.add_results();
  reply.set_done(true);  // two more results, and that is all
  EXPECT_EQ(progress.OnReply(reply, &missing), 2);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].attempt, 3);
  EXPECT_EQ(progress.unanswered(), 0);

  PushProgress failed;
  for (int i = 0; i < 3; ++i) failed.Add(TaskID::FromRandom(), i);
  rpc::PushTaskReply one;
  one.add_results();
  failed.OnReply(one, &missing);
  std::vector<PushProgress::Task> lost = failed.TakeUnanswered();
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].attempt, 1);
  EXPECT_TRUE(failed.TakeUnanswered().empty());
}

}  // namespace
}  // namespace manta::core
