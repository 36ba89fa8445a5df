// PushBatch and PushProgress: what both task submitters share about one push; and
// PackedTask, the form in which the owner keeps and pushes its normal tasks.
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
  rpc::PushTaskRequest request;
  ASSERT_TRUE(request.ParseFromString(batch.TakeRequest()));
  EXPECT_EQ(request.intended_worker_id(), "worker");
  ASSERT_EQ(request.tasks_size(), 3);
  EXPECT_EQ(request.tasks(0).task_id(), a.task_id());
  EXPECT_EQ(request.tasks(0).args(0).data(), a.args(0).data());
  EXPECT_EQ(request.tasks(2).task_id(), d.task_id());
  EXPECT_EQ(batch.progress()->size(), 3u);
  const rpc::ErrorInfo too_big = TooBigForAPush(static_cast<int64_t>(huge.ByteSizeLong()), "task f", 1000);
  EXPECT_NE(too_big.message().find("over the limit of 1000"), std::string::npos) << too_big.message();
}

TEST(PushBatchTest, APackedSpecGoesInAsItsBytesWithTheCallerAppended) {
  rpc::Address caller;
  caller.set_ip_address("10.0.0.1");
  caller.set_port(4321);
  caller.set_worker_id(std::string(28, 'w'));
  const std::string caller_field = CallerAddressField(caller);
  EXPECT_EQ(caller_field.size(), 2 + caller.ByteSizeLong());
  rpc::TaskSpec spec = Spec(1, 100);
  spec.set_attempt_number(2);
  const PackedTaskPtr a = PackedTask::Pack(spec);
  const int64_t a_bytes = static_cast<int64_t>(a->bytes().size());
  EXPECT_EQ(a_bytes, static_cast<int64_t>(spec.ByteSizeLong()));
  // Room for `a` alone, but not with its caller.
  PushBatch tight("worker", 10, a_bytes + static_cast<int64_t>(caller_field.size()) - 1);
  EXPECT_EQ(tight.TryAddPacked(*a, caller_field), PushBatch::Added::kTooBig);
  PushBatch batch("worker", 10, 10000);
  EXPECT_EQ(batch.TryAddPacked(*a, caller_field), PushBatch::Added::kAdded);
  EXPECT_EQ(batch.TryAdd(Spec(2)), PushBatch::Added::kAdded);  // both kinds in one push
  EXPECT_FALSE(a->Unpack().has_caller_address());               // the packed copy is untouched
  rpc::PushTaskRequest request;
  ASSERT_TRUE(request.ParseFromString(batch.TakeRequest()));
  ASSERT_EQ(request.tasks_size(), 2);
  EXPECT_EQ(request.tasks(0).task_id(), spec.task_id());
  EXPECT_EQ(request.tasks(0).attempt_number(), 2);
  EXPECT_EQ(request.tasks(0).args(0).data(), spec.args(0).data());
  EXPECT_EQ(request.tasks(0).caller_address().port(), 4321);
  EXPECT_EQ(request.tasks(0).caller_address().worker_id(), caller.worker_id());
  EXPECT_FALSE(request.tasks(1).has_caller_address());
  ASSERT_EQ(batch.progress()->size(), 2u);
}

TEST(PackedTaskTest, KeepsTheSpecAndItsHotFieldsAndMakesTheNextAttempt) {
  rpc::TaskSpec spec = Spec(7, 10);
  spec.set_function_name("f");
  spec.set_num_returns(2);
  spec.set_max_retries(3);
  spec.set_type(rpc::ACTOR_TASK);
  const PackedTaskPtr packed = PackedTask::Pack(spec);
  EXPECT_EQ(packed->task_id().Binary(), spec.task_id());
  EXPECT_EQ(packed->num_returns(), 2);
  EXPECT_EQ(packed->max_retries(), 3);
  EXPECT_EQ(packed->type(), rpc::ACTOR_TASK);
  EXPECT_EQ(packed->function_name(), "f");
  EXPECT_EQ(packed->Unpack().SerializeAsString(), spec.SerializeAsString());
  const PackedTaskPtr next = packed->NextAttempt();
  EXPECT_EQ(next->attempt_number(), 1);
  EXPECT_EQ(next->Unpack().attempt_number(), 1);
  EXPECT_EQ(packed->attempt_number(), 0);
  EXPECT_EQ(next->task_id(), packed->task_id());
}

// A reply holding the results of `tasks`.
rpc::PushTaskReply ReplyWith(const std::vector<TaskID>& tasks, bool done) {
  rpc::PushTaskReply reply;
  for (const TaskID& id : tasks) reply.add_results()->set_task_id(id.Binary());
  reply.set_done(done);
  return reply;
}

TEST(PushProgressTest, CountsResultsAndHandsBackWhatWasNeverAnswered) {
  PushProgress progress;
  std::vector<TaskID> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(TaskID::FromRandom());
    progress.Add(ids.back(), i);
  }
  std::vector<PushProgress::Task> missing;
  EXPECT_EQ(progress.OnReply(ReplyWith({ids[0]}, false), &missing), 1);
  EXPECT_TRUE(missing.empty());
  // Two more results, and that is all.
  EXPECT_EQ(progress.OnReply(ReplyWith({ids[1], ids[2]}, true), &missing), 2);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].attempt, 3);
  EXPECT_EQ(progress.unanswered(), 0);

  PushProgress failed;
  ids.clear();
  for (int i = 0; i < 3; ++i) {
    ids.push_back(TaskID::FromRandom());
    failed.Add(ids.back(), i);
  }
  failed.OnReply(ReplyWith({ids[0]}, false), &missing);
  std::vector<PushProgress::Task> lost = failed.TakeUnanswered();
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].attempt, 1);
  EXPECT_TRUE(failed.TakeUnanswered().empty());
}

// A threaded actor answers a push's calls as they finish, out of order: the calls
// that never got a result are the ones handed back, whatever their place.
TEST(PushProgressTest, ResultsOutOfOrderLeaveTheRightCallsUnanswered) {
  PushProgress progress;
  std::vector<TaskID> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(TaskID::FromRandom());
    progress.Add(ids.back(), i);
  }
  std::vector<PushProgress::Task> missing;
  EXPECT_EQ(progress.OnReply(ReplyWith({ids[3], ids[1]}, false), &missing), 2);
  // A result listed twice, or of a task not in this push, answers nothing.
  EXPECT_EQ(progress.OnReply(ReplyWith({ids[3], TaskID::FromRandom()}, false), &missing), 0);
  EXPECT_EQ(progress.unanswered(), 3);
  std::vector<PushProgress::Task> lost = progress.TakeUnanswered();
  ASSERT_EQ(lost.size(), 3u);
  EXPECT_EQ(lost[0].task_id, ids[0]);
  EXPECT_EQ(lost[1].task_id, ids[2]);
  EXPECT_EQ(lost[2].task_id, ids[4]);

  PushProgress done;
  for (const TaskID& id : ids) done.Add(id, 0);
  EXPECT_EQ(done.OnReply(ReplyWith({ids[4], ids[0]}, true), &missing), 2);
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_EQ(missing[0].task_id, ids[1]);
  EXPECT_EQ(missing[2].task_id, ids[3]);
}

}  // namespace
}  // namespace manta::core
