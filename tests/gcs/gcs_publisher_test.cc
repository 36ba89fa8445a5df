// GcsPublisher: long polls held and answered, channel filtering, acknowledgement
// and resend, timeouts on a fake clock, the per-subscriber queue cap, and resource
// reports (superseded by a node's newer report, batched).
#include "src/gcs/gcs_publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kPollTimeoutMs = 1000;
constexpr int64_t kSubscriberTimeoutMs = 5000;
constexpr int64_t kMaxQueued = 3;
constexpr int64_t kMaxSubscribers = 4;

// One poll in flight: the reply the publisher fills and how it was answered.
struct Poll {
  rpc::GcsSubscriberPollReply reply;
  ReplyRecorder recorder;

  std::vector<std::string> keys() const {
    std::vector<std::string> keys;
    for (const auto& m : messages()) keys.push_back(m.key_id());
    return keys;
  }
  int64_t last_sequence_id() const {
    return messages().empty() ? 0 : messages().back().sequence_id();
  }
  std::vector<rpc::PubMessage> messages() const { return ParsePubMessages(reply); }
  rpc::PubMessage message(int i) const { return messages().at(static_cast<size_t>(i)); }
};

rpc::PubMessage Message(rpc::ChannelType channel, const std::string& key) {
  rpc::PubMessage m;
  m.set_channel_type(channel);
  m.set_key_id(key);
  return m;
}

class GcsPublisherTest : public ::testing::Test {
 protected:
  GcsPublisherTest() : publisher_(Options(), clock_.AsFunction()) {}

  static GcsPublisher::Options Options() {
    GcsPublisher::Options o;
    o.poll_timeout_ms = kPollTimeoutMs;
    o.subscriber_timeout_ms = kSubscriberTimeoutMs;
    o.max_queued_messages = kMaxQueued;
    o.max_subscribers = kMaxSubscribers;
    return o;
  }

  void Subscribe(const std::string& subscriber, rpc::ChannelType channel, bool unsubscribe = false) {
    rpc::GcsSubscriberCommandBatchRequest request;
    request.set_subscriber_id(subscriber);
    auto* command = request.add_commands();
    command->set_channel_type(channel);
    command->set_unsubscribe(unsubscribe);
    EXPECT_TRUE(publisher_.HandleCommandBatch(request).ok());
  }

  // Polls as `subscriber`, acknowledging everything up to `acked` of the current
  // publisher. The returned Poll must outlive the held poll (it owns the reply).
  std::unique_ptr<Poll> StartPoll(const std::string& subscriber, int64_t acked = 0) {
    return StartPollWithPublisher(subscriber, acked, publisher_.publisher_id());
  }
  std::unique_ptr<Poll> StartPollWithPublisher(const std::string& subscriber, int64_t acked,
                                               const std::string& publisher_id) {
    auto poll = std::make_unique<Poll>();
    rpc::GcsSubscriberPollRequest request;
    request.set_subscriber_id(subscriber);
    request.set_max_processed_sequence_id(acked);
    request.set_publisher_id(publisher_id);
    publisher_.HandlePoll(request, &poll->reply, poll->recorder.Sender());
    return poll;
  }

  FakeClock clock_;
  GcsPublisher publisher_;
};

TEST_F(GcsPublisherTest, PollIsHeldUntilAMessageIsPublished) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  auto poll = StartPoll("s");
  EXPECT_FALSE(poll->recorder.replied());

  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  ASSERT_EQ(poll->recorder.calls(), 1);
  EXPECT_THAT(poll->recorder.status(), IsOk());
  EXPECT_EQ(poll->reply.publisher_id(), publisher_.publisher_id());
  ASSERT_THAT(poll->keys(), ElementsAre("n1"));
  EXPECT_EQ(poll->message(0).channel_type(), rpc::GCS_NODE_INFO_CHANNEL);
  EXPECT_GT(poll->message(0).sequence_id(), 0);
}

TEST_F(GcsPublisherTest, PollIsAnsweredAtOnceWhenMessagesAreQueued) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n2"));

  auto poll = StartPoll("s");
  ASSERT_EQ(poll->recorder.calls(), 1);
  EXPECT_THAT(poll->recorder.status(), IsOk());
  EXPECT_THAT(poll->keys(), ElementsAre("n1", "n2"));
  EXPECT_LT(poll->message(0).sequence_id(), poll->message(1).sequence_id());
}

TEST_F(GcsPublisherTest, SubscribersReceiveOnlyTheirChannels) {
  Subscribe("nodes", rpc::GCS_NODE_INFO_CHANNEL);
  Subscribe("jobs", rpc::GCS_JOB_CHANNEL);
  auto node_poll = StartPoll("nodes");
  auto job_poll = StartPoll("jobs");

  publisher_.Publish(Message(rpc::GCS_JOB_CHANNEL, "j1"));
  EXPECT_FALSE(node_poll->recorder.replied()) << "a job message must not wake a node subscriber";
  ASSERT_TRUE(job_poll->recorder.replied());
  EXPECT_THAT(job_poll->keys(), ElementsAre("j1"));

  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  ASSERT_TRUE(node_poll->recorder.replied());
  EXPECT_THAT(node_poll->keys(), ElementsAre("n1"));
}

TEST_F(GcsPublisherTest, MessagesPublishedBeforeSubscribingAreNotDelivered) {
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "early"));
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  auto poll = StartPoll("s");
  EXPECT_FALSE(poll->recorder.replied());
}

TEST_F(GcsPublisherTest, UnsubscribedChannelIsNoLongerDelivered) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  Subscribe("s", rpc::GCS_JOB_CHANNEL);
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL, /*unsubscribe=*/true);
  auto poll = StartPoll("s");

  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  EXPECT_FALSE(poll->recorder.replied());
  publisher_.Publish(Message(rpc::GCS_JOB_CHANNEL, "j1"));
  ASSERT_TRUE(poll->recorder.replied());
  EXPECT_THAT(poll->keys(), ElementsAre("j1"));
}

TEST_F(GcsPublisherTest, AcknowledgedMessagesAreDroppedAndUnacknowledgedOnesResent) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n2"));
  auto first = StartPoll("s");
  ASSERT_THAT(first->keys(), ElementsAre("n1", "n2"));
  int64_t n1_sequence = first->message(0).sequence_id();

  // The subscriber processed only n1 (say the rest of the reply was lost): n2 again.
  auto second = StartPoll("s", /*acked=*/n1_sequence);
  ASSERT_TRUE(second->recorder.replied());
  EXPECT_THAT(second->keys(), ElementsAre("n2"));

  // Everything acknowledged: the next poll waits.
  auto third = StartPoll("s", /*acked=*/second->last_sequence_id());
  EXPECT_FALSE(third->recorder.replied());
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n3"));
  ASSERT_TRUE(third->recorder.replied());
  EXPECT_THAT(third->keys(), ElementsAre("n3"));
}

TEST_F(GcsPublisherTest, AcknowledgementForAnotherPublisherIsIgnored) {
  // Sequence ids of an earlier GCS incarnation say nothing about this one's messages.
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  auto poll = StartPollWithPublisher("s", /*acked=*/1'000'000, "an-older-gcs");
  ASSERT_TRUE(poll->recorder.replied());
  EXPECT_THAT(poll->keys(), ElementsAre("n1"));
}

TEST_F(GcsPublisherTest, PollFromUnknownSubscriberIsNotFound) {
  auto poll = StartPoll("never-subscribed");
  ASSERT_EQ(poll->recorder.calls(), 1);
  EXPECT_THAT(poll->recorder.status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(poll->reply.publisher_id(), publisher_.publisher_id());
}

TEST_F(GcsPublisherTest, HeldPollIsAnsweredEmptyByTickAfterPollTimeout) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  auto poll = StartPoll("s");

  clock_.Advance(kPollTimeoutMs - 1);
  publisher_.Tick();
  EXPECT_FALSE(poll->recorder.replied());

  clock_.Advance(1);
  publisher_.Tick();
  ASSERT_EQ(poll->recorder.calls(), 1);
  EXPECT_THAT(poll->recorder.status(), IsOk());
  EXPECT_THAT(poll->messages(), IsEmpty());
  EXPECT_EQ(poll->reply.publisher_id(), publisher_.publisher_id());

  publisher_.Tick();
  EXPECT_EQ(poll->recorder.calls(), 1) << "answered exactly once";
}

TEST_F(GcsPublisherTest, SilentSubscriberIsDroppedAfterSubscriberTimeout) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  clock_.Advance(kSubscriberTimeoutMs - 1);
  publisher_.Tick();
  EXPECT_EQ(publisher_.num_subscribers(), 1u);

  clock_.Advance(1);
  publisher_.Tick();
  EXPECT_EQ(publisher_.num_subscribers(), 0u);
  auto poll = StartPoll("s");
  EXPECT_THAT(poll->recorder.status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(GcsPublisherTest, SubscriberThatKeepsPollingIsKept) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  for (int64_t waited = 0; waited < 3 * kSubscriberTimeoutMs; waited += kPollTimeoutMs) {
    auto poll = StartPoll("s");
    clock_.Advance(kPollTimeoutMs);
    publisher_.Tick();
    ASSERT_THAT(poll->recorder.status(), IsOk()) << "after " << waited << " ms";
  }
  EXPECT_EQ(publisher_.num_subscribers(), 1u);
}

TEST_F(GcsPublisherTest, SubscriberWaitingInAHeldPollIsNotDroppedWhenTickRunsLate) {
  // The subscriber is not silent while its poll is held. Even if the owner's Tick
  // comes late (a busy loop, or poll_timeout_ms >= subscriber_timeout_ms), answering
  // the expired poll must not also drop the subscriber that is waiting on it.
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  auto poll = StartPoll("s");
  clock_.Advance(kSubscriberTimeoutMs + 1);
  publisher_.Tick();
  ASSERT_THAT(poll->recorder.status(), IsOk());
  EXPECT_EQ(publisher_.num_subscribers(), 1u);

  // It polls again right away and still gets what is published.
  auto next = StartPoll("s");
  EXPECT_FALSE(next->recorder.replied());
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  ASSERT_TRUE(next->recorder.replied());
  EXPECT_THAT(next->recorder.status(), IsOk());
  EXPECT_THAT(next->keys(), ElementsAre("n1"));
}

TEST_F(GcsPublisherTest, SubscriberAnsweredAfterALongHeldPollHasTimeToPollAgain) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  auto poll = StartPoll("s");
  clock_.Advance(kSubscriberTimeoutMs);
  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  ASSERT_TRUE(poll->recorder.replied());

  // A Tick between the answer and the subscriber's next poll must not drop it.
  publisher_.Tick();
  EXPECT_EQ(publisher_.num_subscribers(), 1u);
  auto next = StartPoll("s", poll->last_sequence_id());
  EXPECT_FALSE(next->recorder.replied()) << next->recorder.status();
}

TEST_F(GcsPublisherTest, SecondPollReplacesTheHeldOne) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  auto first = StartPoll("s");
  auto second = StartPoll("s");

  ASSERT_EQ(first->recorder.calls(), 1) << "the replaced poll is answered (empty)";
  EXPECT_THAT(first->recorder.status(), IsOk());
  EXPECT_THAT(first->messages(), IsEmpty());
  EXPECT_FALSE(second->recorder.replied());

  publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n1"));
  ASSERT_TRUE(second->recorder.replied());
  EXPECT_THAT(second->keys(), ElementsAre("n1"));
  EXPECT_EQ(first->recorder.calls(), 1);
}

TEST_F(GcsPublisherTest, FullQueueDropsTheOldestMessages) {
  Subscribe("s", rpc::GCS_NODE_INFO_CHANNEL);
  for (const char* key : {"m1", "m2", "m3", "m4", "m5"}) {
    publisher_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, key));
  }
  auto poll = StartPoll("s");
  ASSERT_TRUE(poll->recorder.replied());
  EXPECT_THAT(poll->keys(), ElementsAre("m3", "m4", "m5"));
}

TEST_F(GcsPublisherTest, SubscribersOverTheLimitAreRefusedUntilOneIsDropped) {
  for (int i = 0; i < kMaxSubscribers; ++i) Subscribe("s" + std::to_string(i), rpc::GCS_NODE_INFO_CHANNEL);
  rpc::GcsSubscriberCommandBatchRequest request;
  request.set_subscriber_id("one too many");
  request.add_commands()->set_channel_type(rpc::GCS_NODE_INFO_CHANNEL);
  absl::Status refused = publisher_.HandleCommandBatch(request);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_EQ(publisher_.num_subscribers(), static_cast<size_t>(kMaxSubscribers));
  Subscribe("s0", rpc::GCS_JOB_CHANNEL);  // a known subscriber still changes its subscriptions
  // Silent subscribers are dropped, which makes room.
  clock_.Advance(kSubscriberTimeoutMs + 1);
  publisher_.Tick();
  EXPECT_TRUE(publisher_.HandleCommandBatch(request).ok());
}

TEST_F(GcsPublisherTest, FlushAllAnswersEveryHeldPoll) {
  Subscribe("a", rpc::GCS_NODE_INFO_CHANNEL);
  Subscribe("b", rpc::GCS_JOB_CHANNEL);
  auto a = StartPoll("a");
  auto b = StartPoll("b");
  publisher_.FlushAll();
  EXPECT_EQ(a->recorder.calls(), 1);
  EXPECT_EQ(b->recorder.calls(), 1);
  EXPECT_THAT(a->recorder.status(), IsOk());
}

TEST_F(GcsPublisherTest, EachIncarnationHasItsOwnPublisherId) {
  GcsPublisher other(Options(), clock_.AsFunction());
  EXPECT_FALSE(publisher_.publisher_id().empty());
  EXPECT_NE(other.publisher_id(), publisher_.publisher_id());
}

// Resource reports: with batching on, a subscriber answered less than batch_ms ago
// gets the next ones at FlushBatched, once, the newest of each node; any other message
// answers at once and carries them along.
class GcsPublisherBatchTest : public GcsPublisherTest {
 protected:
  GcsPublisherBatchTest() : batched_(BatchOptions(), clock_.AsFunction()) {}
  static GcsPublisher::Options BatchOptions() {
    GcsPublisher::Options o = Options();
    o.max_queued_messages = 100;
    o.batch_ms = 100;
    return o;
  }
  // Polls after processing the answer to `after` (none: nothing processed yet, or
  // that answer was lost).
  std::unique_ptr<Poll> PollBatched(const std::string& subscriber, const Poll* after) {
    return PollOn(batched_, subscriber, after);
  }
  static std::unique_ptr<Poll> PollOn(GcsPublisher& publisher, const std::string& subscriber, const Poll* after) {
    auto poll = std::make_unique<Poll>();
    rpc::GcsSubscriberPollRequest request;
    request.set_subscriber_id(subscriber);
    request.set_max_processed_sequence_id(after == nullptr ? 0 : after->last_sequence_id());
    request.set_last_answer_id(after == nullptr ? 0 : after->reply.answer_id());
    request.set_publisher_id(publisher.publisher_id());
    publisher.HandlePoll(request, &poll->reply, poll->recorder.Sender());
    return poll;
  }
  void SubscribeBatched(const std::string& subscriber) {
    rpc::GcsSubscriberCommandBatchRequest request;
    request.set_subscriber_id(subscriber);
    for (auto channel : {rpc::RESOURCE_USAGE_CHANNEL, rpc::GCS_NODE_INFO_CHANNEL}) {
      request.add_commands()->set_channel_type(channel);
    }
    ASSERT_TRUE(batched_.HandleCommandBatch(request).ok());
  }
  GcsPublisher batched_;
};

TEST_F(GcsPublisherBatchTest, ReportsWaitForTheBatchAndOnlyTheNewestOfANodeIsSent) {
  SubscribeBatched("s");
  clock_.Advance(1000);
  auto first = PollBatched("s", nullptr);
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  EXPECT_FALSE(first->recorder.replied());  // reports alone answer at the flush
  batched_.FlushBatched();
  ASSERT_EQ(first->recorder.calls(), 1);  // the first answer in a long while: at the next flush
  auto second = PollBatched("s", first.get());
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "b"));
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  batched_.FlushBatched();
  EXPECT_FALSE(second->recorder.replied());  // less than batch_ms since the last answer
  clock_.Advance(100);
  batched_.FlushBatched();
  ASSERT_EQ(second->recorder.calls(), 1);
  EXPECT_THAT(second->keys(), ElementsAre("b", "a"));
  EXPECT_EQ(second->message(1).sequence_id(), second->last_sequence_id());
  EXPECT_GT(second->message(1).sequence_id(), second->message(0).sequence_id());
}

// News of a node does not wait behind the reports: another channel answers at once,
// without the reports not yet due, which come at their time and are acknowledged by
// answer (their sequence ids are below the news the subscriber acknowledged).
TEST_F(GcsPublisherBatchTest, AnotherChannelAnswersAtOnceWithoutTheReportsNotYetDue) {
  SubscribeBatched("s");
  clock_.Advance(1000);
  auto first = PollBatched("s", nullptr);
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  batched_.FlushBatched();
  auto second = PollBatched("s", first.get());
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "b"));
  EXPECT_FALSE(second->recorder.replied());
  batched_.Publish(Message(rpc::GCS_NODE_INFO_CHANNEL, "n"));
  ASSERT_EQ(second->recorder.calls(), 1);
  EXPECT_THAT(second->keys(), ElementsAre("n"));
  auto third = PollBatched("s", second.get());
  EXPECT_FALSE(third->recorder.replied());
  clock_.Advance(100);
  batched_.FlushBatched();
  ASSERT_EQ(third->recorder.calls(), 1);
  EXPECT_THAT(third->keys(), ElementsAre("b"));
  EXPECT_LT(third->last_sequence_id(), second->last_sequence_id());
  // Acknowledged, nothing is left to send: the next poll is held.
  auto fourth = PollBatched("s", third.get());
  clock_.Advance(1000);
  batched_.FlushBatched();
  EXPECT_FALSE(fourth->recorder.replied());
}

TEST_F(GcsPublisherBatchTest, AnUnacknowledgedReportIsResentUnlessSuperseded) {
  SubscribeBatched("s");
  clock_.Advance(1000);
  auto first = PollBatched("s", nullptr);
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  batched_.FlushBatched();
  ASSERT_EQ(first->recorder.calls(), 1);
  // The reply was lost: the next poll acknowledges nothing and gets "a" again...
  clock_.Advance(100);
  auto again = PollBatched("s", nullptr);
  ASSERT_EQ(again->recorder.calls(), 1);
  EXPECT_THAT(again->keys(), ElementsAre("a"));
  // ...unless a newer report of that node came meanwhile.
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  const int64_t newest = [&] {
    clock_.Advance(100);
    auto lost = PollBatched("s", nullptr);
    EXPECT_EQ(lost->messages().size(), 1u);
    return lost->last_sequence_id();
  }();
  EXPECT_GT(newest, again->last_sequence_id());
}

// Reports are kept once, the newest of each node: one published before a subscriber
// subscribed is not its news, and a dead node's is dropped unsent.
TEST_F(GcsPublisherBatchTest, ReportsBeforeSubscribingOrOfDeadNodesAreNotSent) {
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "old"));
  SubscribeBatched("s");
  clock_.Advance(1000);
  auto first = PollBatched("s", nullptr);
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "dead"));
  batched_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "alive"));
  batched_.DropReport("dead");
  batched_.FlushBatched();
  ASSERT_EQ(first->recorder.calls(), 1);
  EXPECT_THAT(first->keys(), ElementsAre("alive"));
  // Reports are subscribed to as a whole channel.
  rpc::GcsSubscriberCommandBatchRequest by_node;
  by_node.set_subscriber_id("t");
  by_node.add_commands()->set_channel_type(rpc::RESOURCE_USAGE_CHANNEL);
  by_node.mutable_commands(0)->set_key_id("alive");
  EXPECT_EQ(batched_.HandleCommandBatch(by_node).code(), absl::StatusCode::kInvalidArgument);
}

// In a large cluster each report subscriber gets its reports less often, so the
// answers of the GCS a second stay flat: here at most 10 a second, with two report
// subscribers (a subscriber of other channels does not count) every 200 ms.
class GcsPublisherBoundedBatchTest : public GcsPublisherBatchTest {
 protected:
  GcsPublisherBoundedBatchTest() : bounded_(Bounded(), clock_.AsFunction()) {}
  static GcsPublisher::Options Bounded() {
    GcsPublisher::Options o = BatchOptions();
    o.max_batched_answers_per_s = 10;
    return o;
  }
  void Subscribe(const std::string& subscriber, rpc::ChannelType channel) {
    rpc::GcsSubscriberCommandBatchRequest request;
    request.set_subscriber_id(subscriber);
    request.add_commands()->set_channel_type(channel);
    ASSERT_TRUE(bounded_.HandleCommandBatch(request).ok());
  }
  std::unique_ptr<Poll> PollBounded(const std::string& subscriber, const Poll* after) {
    return PollOn(bounded_, subscriber, after);
  }
  GcsPublisher bounded_;
};

TEST_F(GcsPublisherBoundedBatchTest, ReportsComeLessOftenAsReportSubscribersGrow) {
  Subscribe("r1", rpc::RESOURCE_USAGE_CHANNEL);
  Subscribe("r2", rpc::RESOURCE_USAGE_CHANNEL);
  Subscribe("driver", rpc::GCS_NODE_INFO_CHANNEL);
  clock_.Advance(1000);
  auto first = PollBounded("r1", nullptr);
  bounded_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  bounded_.FlushBatched();
  ASSERT_EQ(first->recorder.calls(), 1);
  auto second = PollBounded("r1", first.get());
  bounded_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "b"));
  clock_.Advance(100);  // batch_ms alone would answer now
  bounded_.FlushBatched();
  EXPECT_FALSE(second->recorder.replied());
  clock_.Advance(100);
  bounded_.FlushBatched();
  ASSERT_EQ(second->recorder.calls(), 1);
  EXPECT_THAT(second->keys(), ElementsAre("b"));
  // One report subscriber leaves that channel: batch_ms again.
  Subscribe("r2", rpc::GCS_NODE_INFO_CHANNEL);
  rpc::GcsSubscriberCommandBatchRequest leave;
  leave.set_subscriber_id("r2");
  auto* command = leave.add_commands();
  command->set_channel_type(rpc::RESOURCE_USAGE_CHANNEL);
  command->set_unsubscribe(true);
  ASSERT_TRUE(bounded_.HandleCommandBatch(leave).ok());
  auto third = PollBounded("r1", second.get());
  bounded_.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "c"));
  clock_.Advance(100);
  bounded_.FlushBatched();
  ASSERT_EQ(third->recorder.calls(), 1);
  EXPECT_THAT(third->keys(), ElementsAre("c"));
}

// A flush answers at most the bound's share of report subscribers (here 20 a second
// every 100 ms: 2), so four subscribers polling together come due two at a flush, and
// stay spread afterwards instead of answering all at once every window (200 ms).
TEST_F(GcsPublisherBoundedBatchTest, AFlushAnswersAtMostItsShareSoSubscribersStaySpread) {
  GcsPublisher::Options o = Bounded();
  o.max_batched_answers_per_s = 20;
  GcsPublisher publisher(o, clock_.AsFunction());
  const std::vector<std::string> ids = {"r1", "r2", "r3", "r4"};
  for (const std::string& id : ids) {
    rpc::GcsSubscriberCommandBatchRequest request;
    request.set_subscriber_id(id);
    request.add_commands()->set_channel_type(rpc::RESOURCE_USAGE_CHANNEL);
    ASSERT_TRUE(publisher.HandleCommandBatch(request).ok());
  }
  clock_.Advance(1000);
  std::map<std::string, std::unique_ptr<Poll>> polls;
  for (const std::string& id : ids) polls[id] = PollOn(publisher, id, nullptr);
  // Answers this flush; every subscriber whose poll was answered polls again.
  auto flush = [&] {
    publisher.FlushBatched();
    std::set<std::string> answered;
    for (const std::string& id : ids) {
      if (!polls[id]->recorder.replied()) continue;
      answered.insert(id);
      polls[id] = PollOn(publisher, id, polls[id].get());
    }
    clock_.Advance(100);
    return answered;
  };
  publisher.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "a"));
  const std::set<std::string> first = flush();
  EXPECT_EQ(first.size(), 2u);
  const std::set<std::string> second = flush();
  EXPECT_EQ(second.size(), 2u);
  std::set<std::string> both = first;
  both.insert(second.begin(), second.end());
  EXPECT_EQ(both.size(), 4u);
  // A new report: each half comes due at its own flush, a window after its answer.
  publisher.Publish(Message(rpc::RESOURCE_USAGE_CHANNEL, "b"));
  EXPECT_EQ(flush(), first);
  EXPECT_EQ(flush(), second);
  EXPECT_THAT(flush(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace manta::gcs::testing
