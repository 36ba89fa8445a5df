#include "src/gcs/gcs_subscriber.h"

#include <glog/logging.h>
#include <google/protobuf/arena.h>

#include <algorithm>

#include "src/common/id.h"

namespace manta::gcs {

GcsSubscriber::GcsSubscriber(EventLoop& loop, GcsClientInterface& gcs, std::vector<rpc::ChannelType> channels,
                             int64_t poll_timeout_ms, std::function<void(const rpc::PubMessage&)> on_message,
                             std::function<void()> on_resync)
    : loop_(loop),
      gcs_(gcs),
      channels_(std::move(channels)),
      poll_timeout_ms_(poll_timeout_ms),
      on_message_(std::move(on_message)),
      on_resync_(std::move(on_resync)),
      subscriber_id_(WorkerID::FromRandom().Binary()) {}

GcsSubscriber::~GcsSubscriber() { *alive_ = false; }

void GcsSubscriber::Start() {
  started_ = true;
  Subscribe();
}

void GcsSubscriber::SubscribeKey(rpc::ChannelType channel, const std::string& key,
                                 std::function<void(absl::Status)> done) {
  keys_.emplace(channel, key);
  if (!started_) {
    if (done) loop_.Post("GcsSubscriber.KeyQueued", [done] { done(absl::OkStatus()); });
    return;
  }
  rpc::GcsSubscriberCommandBatchRequest request;
  request.set_subscriber_id(subscriber_id_);
  rpc::SubscribeCommand* command = request.add_commands();
  command->set_channel_type(channel);
  command->set_key_id(key);
  gcs_.AsyncSubscriberCommandBatch(request, [done](const absl::Status& s, rpc::GcsSubscriberCommandBatchReply&&) {
    if (done) done(s);
  });
}

void GcsSubscriber::UnsubscribeKey(rpc::ChannelType channel, const std::string& key) {
  if (keys_.erase({channel, key}) == 0 || !started_) return;
  rpc::GcsSubscriberCommandBatchRequest request;
  request.set_subscriber_id(subscriber_id_);
  rpc::SubscribeCommand* command = request.add_commands();
  command->set_channel_type(channel);
  command->set_key_id(key);
  command->set_unsubscribe(true);
  gcs_.AsyncSubscriberCommandBatch(request, [](const absl::Status& s, rpc::GcsSubscriberCommandBatchReply&&) {
    if (!s.ok()) VLOG(1) << "unsubscribing a key failed: " << s;
  });
}

void GcsSubscriber::RetryLater(void (GcsSubscriber::*step)()) {
  int64_t delay = backoff_ms_;
  backoff_ms_ = std::min<int64_t>(backoff_ms_ * 2, 1000);
  loop_.PostAfter("GcsSubscriber.Retry", delay, [this, step, alive = alive_] {
    if (*alive) (this->*step)();
  });
}

void GcsSubscriber::Subscribe() {
  rpc::GcsSubscriberCommandBatchRequest request;
  request.set_subscriber_id(subscriber_id_);
  for (auto c : channels_) request.add_commands()->set_channel_type(c);
  for (const auto& [channel, key] : keys_) {
    rpc::SubscribeCommand* command = request.add_commands();
    command->set_channel_type(channel);
    command->set_key_id(key);
  }
  gcs_.AsyncSubscriberCommandBatch(
      request, [this, alive = alive_](const absl::Status& s, rpc::GcsSubscriberCommandBatchReply&&) {
        if (!*alive) return;
        if (on_poll_result_) on_poll_result_(s);
        if (!s.ok()) {
          VLOG(1) << "subscribe failed: " << s;
          RetryLater(&GcsSubscriber::Subscribe);
          return;
        }
        backoff_ms_ = 100;
        Poll();
      });
}

void GcsSubscriber::Poll() {
  rpc::GcsSubscriberPollRequest request;
  request.set_subscriber_id(subscriber_id_);
  request.set_max_processed_sequence_id(max_processed_);
  request.set_publisher_id(publisher_id_);
  request.set_last_answer_id(last_answer_id_);
  gcs_.AsyncSubscriberPoll(
      request, poll_timeout_ms_ + 10000,
      [this, alive = alive_](const absl::Status& s, rpc::GcsSubscriberPollReply&& reply) {
        if (!*alive) return;
        if (on_poll_result_) on_poll_result_(s);
        if (s.code() == absl::StatusCode::kNotFound) {
          // The GCS does not know us: it restarted. Subscribe again and resync.
          LOG(INFO) << "GCS forgot this subscriber (restarted?); subscribing again";
          publisher_id_.clear();
          max_processed_ = 0;
          last_answer_id_ = 0;
          Subscribe();
          if (on_resync_) on_resync_();
          return;
        }
        if (!s.ok()) {
          VLOG(1) << "poll failed: " << s;
          RetryLater(&GcsSubscriber::Poll);
          return;
        }
        backoff_ms_ = 100;
        bool new_publisher = !publisher_id_.empty() && reply.publisher_id() != publisher_id_;
        if (publisher_id_ != reply.publisher_id()) {
          publisher_id_ = reply.publisher_id();
          max_processed_ = 0;
        }
        ForEachPubMessage(reply, [this](const rpc::PubMessage& m) {
          // Resource reports come apart from the rest, after messages published
          // later; each is a node's newest, and one sent again changes nothing.
          const bool report = m.channel_type() == rpc::RESOURCE_USAGE_CHANNEL;
          if (m.sequence_id() <= max_processed_ && !report) return;
          max_processed_ = std::max(max_processed_, m.sequence_id());
          on_message_(m);
        });
        last_answer_id_ = reply.answer_id();
        if (new_publisher && on_resync_) on_resync_();
        Poll();
      });
}

void ForEachPubMessage(const rpc::GcsSubscriberPollReply& reply,
                       absl::FunctionRef<void(const rpc::PubMessage&)> fn) {
  // An answer can carry hundreds of resource reports, each with maps of resources:
  // from malloc, one by one, they cost more than their parsing.
  google::protobuf::ArenaOptions options;
  options.start_block_size = 4096;
  options.max_block_size = 1 << 20;
  google::protobuf::Arena arena(options);
  for (const std::string& bytes : reply.pub_messages()) {
    auto* m = google::protobuf::Arena::CreateMessage<rpc::PubMessage>(&arena);
    if (!m->ParseFromString(bytes)) {
      LOG(ERROR) << "a pubsub message from the GCS does not parse (" << bytes.size() << " bytes); skipped";
      continue;
    }
    fn(*m);
  }
}

std::vector<rpc::PubMessage> ParsePubMessages(const rpc::GcsSubscriberPollReply& reply) {
  std::vector<rpc::PubMessage> messages;
  ForEachPubMessage(reply, [&messages](const rpc::PubMessage& m) { messages.push_back(m); });
  return messages;
}

}  // namespace manta::gcs
