#include "src/gcs/gcs_publisher.h"

#include <glog/logging.h>

#include <algorithm>

#include "src/common/id.h"

namespace manta::gcs {

GcsPublisher::GcsPublisher(Options options, std::function<int64_t()> now_ms)
    : options_(options), now_ms_(std::move(now_ms)), publisher_id_(NodeID::FromRandom().Binary()) {}

void GcsPublisher::Publish(rpc::PubMessage message) {
  message.set_sequence_id(next_sequence_id_++);
  auto shared = std::make_shared<const Published>(
      Published{message.channel_type(), message.key_id(), message.sequence_id(), message.SerializeAsString()});
  for (auto& [id, subscriber] : subscribers_) {
    if (!subscriber.Wants(*shared)) continue;
    Enqueue(subscriber, shared);
    if (static_cast<int64_t>(subscriber.queue.size()) > options_.max_queued_messages) {
      LOG_EVERY_N(WARNING, 1000) << "pubsub queue full for a subscriber; dropping oldest messages";
      PopFront(subscriber);
    }
    if (subscriber.poll.has_value() && Due(subscriber)) Answer(subscriber);
  }
}

void GcsPublisher::Enqueue(Subscriber& subscriber, const std::shared_ptr<const Published>& message) {
  const int64_t seq = message->sequence_id;
  if (Batched(*message)) {
    auto [it, inserted] = subscriber.queued_reports.try_emplace(message->key_id, seq);
    if (!inserted) {
      // The queue is in sequence order: find the older report and skip it.
      auto old = std::lower_bound(subscriber.queue.begin(), subscriber.queue.end(), it->second,
                                  [](const Queued& q, int64_t s) { return q.message->sequence_id < s; });
      if (old != subscriber.queue.end() && old->message->sequence_id == it->second) old->superseded = true;
      it->second = seq;
    }
  } else {
    ++subscriber.urgent;
  }
  subscriber.queue.push_back(Queued{message, false});
}

void GcsPublisher::PopFront(Subscriber& subscriber) {
  const Published& m = *subscriber.queue.front().message;
  if (!Batched(m)) {
    --subscriber.urgent;
  } else if (auto it = subscriber.queued_reports.find(m.key_id);
             it != subscriber.queued_reports.end() && it->second == m.sequence_id) {
    subscriber.queued_reports.erase(it);
  }
  subscriber.queue.pop_front();
}

bool GcsPublisher::Due(const Subscriber& subscriber) const {
  if (subscriber.queue.empty()) return false;
  return subscriber.urgent > 0 || now_ms_() - subscriber.last_answer_ms >= options_.batch_ms;
}

void GcsPublisher::FlushBatched() {
  for (auto& [id, s] : subscribers_) {
    if (s.poll.has_value() && Due(s)) Answer(s);
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
           subscriber.queue.front().message->sequence_id <= request.max_processed_sequence_id()) {
      PopFront(subscriber);
    }
  }
  subscriber.poll = HeldPoll{reply, std::move(send_reply), now_ms_()};
  if (Due(subscriber)) Answer(subscriber);
}

void GcsPublisher::Answer(Subscriber& subscriber) {
  HeldPoll poll = std::move(*subscriber.poll);
  subscriber.poll.reset();
  // The subscriber was waiting on this poll until now: it is not silent, and it
  // gets a full subscriber_timeout_ms from here to poll again.
  subscriber.last_seen_ms = now_ms_();
  subscriber.last_answer_ms = subscriber.last_seen_ms;
  poll.reply->set_publisher_id(publisher_id_);
  // Messages stay queued until acknowledged by the next poll.
  for (const Queued& q : subscriber.queue) {
    if (!q.superseded) poll.reply->add_pub_messages(q.message->bytes);
  }
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
