#include "src/gcs/gcs_publisher.h"

#include <glog/logging.h>

#include <algorithm>
#include <limits>

#include "src/common/id.h"

namespace manta::gcs {

GcsPublisher::GcsPublisher(Options options, std::function<int64_t()> now_ms)
    : options_(options), now_ms_(std::move(now_ms)), publisher_id_(NodeID::FromRandom().Binary()) {}

void GcsPublisher::Publish(rpc::PubMessage message) {
  message.set_sequence_id(next_sequence_id_++);
  auto shared = std::make_shared<const Published>(
      Published{message.channel_type(), message.key_id(), message.sequence_id(), message.SerializeAsString()});
  if (Batched(*shared)) return PublishReport(std::move(shared));
  for (auto& [id, subscriber] : subscribers_) {
    if (!subscriber.Wants(*shared)) continue;
    subscriber.queue.push_back(shared);
    if (static_cast<int64_t>(subscriber.queue.size()) > options_.max_queued_messages) {
      LOG_EVERY_N(WARNING, 1000) << "pubsub queue full for a subscriber; dropping oldest messages";
      subscriber.queue.pop_front();
    }
    if (subscriber.poll.has_value()) Answer(subscriber);
  }
}

void GcsPublisher::PublishReport(std::shared_ptr<const Published> report) {
  auto [it, inserted] = report_of_.try_emplace(report->key_id);
  if (!inserted) reports_.erase(it->second);
  it->second = reports_.insert(reports_.end(), std::move(report));
  if (options_.batch_ms > 0) return;  // FlushBatched answers
  for (auto& [id, subscriber] : subscribers_) {
    if (subscriber.poll.has_value() && subscriber.WantsReports()) Answer(subscriber);
  }
}

void GcsPublisher::DropReport(const std::string& key) {
  auto it = report_of_.find(key);
  if (it == report_of_.end()) return;
  reports_.erase(it->second);
  report_of_.erase(it);
}

bool GcsPublisher::HasReportsFor(const Subscriber& subscriber) const {
  return subscriber.WantsReports() && !reports_.empty() && reports_.back()->sequence_id > subscriber.reports_acked;
}

bool GcsPublisher::ReportsDue(const Subscriber& subscriber) const {
  return HasReportsFor(subscriber) && now_ms_() - subscriber.last_report_answer_ms >= BatchWindowMs();
}

bool GcsPublisher::Due(const Subscriber& subscriber) const {
  return !subscriber.queue.empty() || ReportsDue(subscriber);
}

int64_t GcsPublisher::BatchWindowMs() const {
  if (options_.max_batched_answers_per_s <= 0) return options_.batch_ms;
  const int64_t spread = report_subscribers_ * 1000 / options_.max_batched_answers_per_s;
  return std::max(options_.batch_ms, spread);
}

int64_t GcsPublisher::ReportAnswersPerFlush() const {
  if (options_.max_batched_answers_per_s <= 0) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(1, options_.max_batched_answers_per_s * options_.batch_ms / 1000);
}

void GcsPublisher::FlushBatched() {
  // Subscribers answered at one flush would stay in step (each waits the same window)
  // and come due together for good: one burst of answers for the GCS and for them.
  // Beyond a flush's share of the bound, reports wait for the next flush.
  int64_t budget = ReportAnswersPerFlush();
  for (auto& [id, s] : subscribers_) {
    if (!s.poll.has_value()) continue;
    const bool reports = ReportsDue(s);
    if (s.queue.empty() && (!reports || budget <= 0)) continue;
    budget -= reports ? 1 : 0;
    Answer(s);
  }
}

absl::Status GcsPublisher::HandleCommandBatch(const rpc::GcsSubscriberCommandBatchRequest& request) {
  for (const auto& command : request.commands()) {
    if (command.channel_type() == rpc::RESOURCE_USAGE_CHANNEL && !command.key_id().empty()) {
      return absl::InvalidArgumentError("resource reports are subscribed to as a whole channel, not by node");
    }
  }
  if (!subscribers_.contains(request.subscriber_id()) &&
      static_cast<int64_t>(subscribers_.size()) >= options_.max_subscribers) {
    return absl::ResourceExhaustedError("the GCS has " + std::to_string(subscribers_.size()) +
                                        " pubsub subscribers, its limit (gcs_max_subscribers)");
  }
  Subscriber& subscriber = subscribers_[request.subscriber_id()];
  subscriber.last_seen_ms = now_ms_();
  const bool had_reports = subscriber.WantsReports();
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
  if (subscriber.WantsReports() != had_reports) {
    report_subscribers_ += had_reports ? -1 : 1;
    // Reports published before it subscribed are not its news (it reads the table).
    if (!had_reports) subscriber.reports_acked = next_sequence_id_ - 1;
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
    const int64_t acked = request.max_processed_sequence_id();
    while (!subscriber.queue.empty() && subscriber.queue.front()->sequence_id <= acked) subscriber.queue.pop_front();
    if (subscriber.answer_id != 0 && request.last_answer_id() == subscriber.answer_id) {
      subscriber.reports_acked = std::max(subscriber.reports_acked, subscriber.reports_acked_with_answer);
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
  const int64_t now = now_ms_();
  subscriber.last_seen_ms = now;
  poll.reply->set_publisher_id(publisher_id_);
  subscriber.answer_id = next_answer_id_++;
  poll.reply->set_answer_id(subscriber.answer_id);
  // Messages stay queued until acknowledged by the next poll; the reports past the
  // acknowledged ones are sent again until then. Both in sequence order, merged.
  auto report = reports_.end();
  subscriber.reports_acked_with_answer = subscriber.reports_acked;
  if (ReportsDue(subscriber)) {
    subscriber.last_report_answer_ms = now;
    subscriber.reports_acked_with_answer = reports_.back()->sequence_id;
    while (report != reports_.begin() && (*std::prev(report))->sequence_id > subscriber.reports_acked) --report;
  }
  auto queued = subscriber.queue.begin();
  while (queued != subscriber.queue.end() || report != reports_.end()) {
    const bool take_report =
        queued == subscriber.queue.end() ||
        (report != reports_.end() && (*report)->sequence_id < (*queued)->sequence_id);
    poll.reply->add_pub_messages(take_report ? (*report++)->bytes : (*queued++)->bytes);
  }
  std::move(poll.send_reply)(absl::OkStatus());
}

void GcsPublisher::Tick() {
  int64_t now = now_ms_();
  for (auto it = subscribers_.begin(); it != subscribers_.end();) {
    Subscriber& s = it->second;
    if (s.poll.has_value() && now - s.poll->since_ms >= options_.poll_timeout_ms) Answer(s);
    if (!s.poll.has_value() && now - s.last_seen_ms >= options_.subscriber_timeout_ms) {
      report_subscribers_ -= s.WantsReports() ? 1 : 0;
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
