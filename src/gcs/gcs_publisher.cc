#include "src/gcs/gcs_publisher.h"

#include <glog/logging.h>

#include "src/common/id.h"

namespace manta::gcs {

GcsPublisher::GcsPublisher(Options options, std::function<int64_t()> now_ms)
    : options_(options), now_ms_(std::move(now_ms)), publisher_id_(NodeID::FromRandom().Binary()) {}

void GcsPublisher::Publish(rpc::PubMessage message) {
  message.set_sequence_id(next_sequence_id_++);
  for (auto& [id, subscriber] : subscribers_) {
    if (!subscriber.Wants(message)) continue;
    subscriber.queue.push_back(message);
    if (static_cast<int64_t>(subscriber.queue.size()) > options_.max_queued_messages) {
      LOG_EVERY_N(WARNING, 1000) << "pubsub queue full for a subscriber; dropping oldest messages";
      subscriber.queue.pop_front();
    }
    if (subscriber.poll.has_value()) Answer(subscriber);
  }
}

absl::Status GcsPublisher::HandleCommandBatch(const rpc::GcsSubscriberCommandBatchRequest& request) {
  if (!subscribers_.contains(request.subscriber_id()) &&
      static_cast<int64_t>(subscribers_.size()) >= options_.max_subscribers) {
    return absl::ResourceExhaustedError("the GCS has " + std::to_string(subscribers_.size()) +
                                        " pubsub subscribers, its limit (gcs_max_subscribers)");
  }
  Subscriber& subscriber = subscribers_[request.subscriber_id()];
  subscriber.last_seen_ms = now_ms_();
  for (const auto& command : request.commands()) {
    const int channel = command.channel_type();
    if (command.key_id().empty()) {
      if (command.unsubscribe()) {
        subscriber.channels.erase(channel);
      } else {
        subscriber.channels.insert(channel);
      }
    } else if (command.unsubscribe()) {
      auto keys = subscriber.keys.find(channel);
      if (keys == subscriber.keys.end()) continue;
      keys->second.erase(command.key_id());
      if (keys->second.empty()) subscriber.keys.erase(keys);
    } else {
      subscriber.keys[channel].insert(command.key_id());
    }
  }
  return absl::OkStatus();
}

void GcsPublisher::HandlePoll(const rpc::GcsSubscriberPollRequest& request, rpc::GcsSubscriberPollReply* reply,
                              rpc::SendReply send_reply) {
  auto it = subscribers_.find(request.subscriber_id());
  if (it == subscribers_.end()) {
    reply->set_publisher_id(publisher_id_);
    std::move(send_reply)(absl::NotFoundError("unknown subscriber; subscribe again"));
    return;
  }
  Subscriber& subscriber = it->second;
  subscriber.last_seen_ms = now_ms_();
  // A newer poll replaces a held one (the client gave up on it).
  if (subscriber.poll.has_value()) {
    HeldPoll old = std::move(*subscriber.poll);
    subscriber.poll.reset();
    old.reply->set_publisher_id(publisher_id_);
    std::move(old.send_reply)(absl::OkStatus());
  }
  if (request.publisher_id() == publisher_id_) {
    while (!subscriber.queue.empty() &&
           subscriber.queue.front().sequence_id() <= request.max_processed_sequence_id()) {
      subscriber.queue.pop_front();
    }
  }
  subscriber.poll = HeldPoll{reply, std::move(send_reply), now_ms_()};
  if (!subscriber.queue.empty()) Answer(subscriber);
}

void GcsPublisher::Answer(Subscriber& subscriber) {
  HeldPoll poll = std::move(*subscriber.poll);
  subscriber.poll.reset();
  // The subscriber was waiting on this poll until now: it is not silent, and it
  // gets a full subscriber_timeout_ms from here to poll again.
  subscriber.last_seen_ms = now_ms_();
  poll.reply->set_publisher_id(publisher_id_);
  // Messages stay queued until acknowledged by the next poll.
  for (const auto& m : subscriber.queue) *poll.reply->add_pub_messages() = m;
  std::move(poll.send_reply)(absl::OkStatus());
}

void GcsPublisher::Tick() {
  int64_t now = now_ms_();
  for (auto it = subscribers_.begin(); it != subscribers_.end();) {
    Subscriber& s = it->second;
    if (s.poll.has_value() && now - s.poll->since_ms >= options_.poll_timeout_ms) Answer(s);
    if (!s.poll.has_value() && now - s.last_seen_ms >= options_.subscriber_timeout_ms) {
      subscribers_.erase(it++);
      continue;
    }
    ++it;
  }
}

void GcsPublisher::FlushAll() {
  for (auto& [id, s] : subscribers_) {
    if (s.poll.has_value()) Answer(s);
  }
}

}  // namespace manta::gcs
