// GcsPublisher: long-poll pubsub for node, job, resource, worker and actor events (§10).
//
// A subscriber (identified by a random id) subscribes to channels, or to single keys
// of a channel (one actor id), with a command batch, then polls. A poll returns at
// once when messages are queued for it, else it is held until a message arrives or
// `poll_timeout_ms` passes (empty reply). The
// subscriber acknowledges by sending the highest sequence id it processed with the
// next poll, so a lost reply is resent. Subscribers silent for
// `subscriber_timeout_ms` are dropped. publisher_id is random per GCS incarnation: a
// subscriber that sees it change knows state was lost and resynchronises.
// Resource reports (RESOURCE_USAGE_CHANNEL) are news of a node's latest state, and
// every node hears every node's: they are kept once, the newest of each node in
// sequence order, and each subscriber of the channel reads those past its
// acknowledged ones (a newer report of a node replaces the older one, sent or not).
// Publishing one costs the same however many subscribers there are. With `batch_ms`
// > 0 a subscriber gets them at FlushBatched(), no sooner than `batch_ms` after its
// previous answer that carried reports, longer in a large cluster
// (max_batched_answers_per_s); a flush gives at most that bound's share of answers
// with reports, so subscribers come due spread over the flushes, not all at one.
// Other messages are queued per subscriber, each stored once and shared by the
// queues that hold it, and answer a poll at once, without the reports whose time has
// not come: news of a node does not wait behind the reports.
// So reports are acknowledged by answer (answer_id), not by sequence id.
// Loop thread only; Tick() must be called periodically by the owner, and
// FlushBatched() every `batch_ms`.
#pragma once

#include <deque>
#include <memory>
#include <functional>
#include <list>
#include <optional>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "protos/gcs.pb.h"
#include "src/common/rpc/grpc_server.h"

namespace manta::gcs {

class GcsPublisher {
 public:
  struct Options {
    int64_t poll_timeout_ms = 30000;
    int64_t subscriber_timeout_ms = 60000;
    int64_t max_queued_messages = 100000;
    int64_t max_subscribers = 100000;
    // 0: every message answers a held poll at once.
    int64_t batch_ms = 0;
    // With batch_ms: at most this many answers a second carry reports, all their
    // subscribers together (0: no bound). Beyond batch_ms x this many report
    // subscribers (raylets), each waits longer between such answers, so the polls
    // the GCS answers a second stay flat as the cluster grows (each answer carries
    // more reports).
    int64_t max_batched_answers_per_s = 0;
  };

  GcsPublisher(Options options, std::function<int64_t()> now_ms);

  // Queues `message` (its channel_type set) for every subscriber of its channel.
  void Publish(rpc::PubMessage message);
  // Forgets the resource report of `key` (a node that died): it is sent no more.
  void DropReport(const std::string& key);

  // Subscribes / unsubscribes. Creates the subscriber on first use, unless there are
  // max_subscribers already (ResourceExhausted).
  absl::Status HandleCommandBatch(const rpc::GcsSubscriberCommandBatchRequest& request);
  // Answers now or holds `send_reply`. NOT_FOUND for an unknown subscriber (for
  // example after a GCS restart): the subscriber must subscribe again.
  void HandlePoll(const rpc::GcsSubscriberPollRequest& request, rpc::GcsSubscriberPollReply* reply,
                  rpc::SendReply send_reply);
  // Answers polls held past the timeout and drops silent subscribers.
  void Tick();
  // Answers every held poll (empty), e.g. at shutdown.
  void FlushAll();
  // Answers held polls whose batched messages are due (call every batch_ms).
  void FlushBatched();

  const std::string& publisher_id() const { return publisher_id_; }
  size_t num_subscribers() const { return subscribers_.size(); }

 private:
  struct HeldPoll {
    rpc::GcsSubscriberPollReply* reply;
    rpc::SendReply send_reply;
    int64_t since_ms;
  };
  // A published message: what routing needs, and its bytes, serialized once.
  struct Published {
    int channel_type = 0;
    std::string key_id;
    int64_t sequence_id = 0;
    std::string bytes;
  };
  struct Subscriber {
    bool Wants(const Published& m) const {
      if (channels.count(m.channel_type) > 0) return true;
      auto it = keys.find(m.channel_type);
      return it != keys.end() && it->second.contains(m.key_id);
    }
    bool WantsReports() const { return channels.count(rpc::RESOURCE_USAGE_CHANNEL) > 0; }
    std::set<int> channels;
    // Channel -> the keys subscribed one by one.
    absl::flat_hash_map<int, absl::flat_hash_set<std::string>> keys;
    // Messages of other channels than reports, until acknowledged.
    std::deque<std::shared_ptr<const Published>> queue;
    // The reports up to this sequence id are acknowledged (or were published
    // before it subscribed).
    int64_t reports_acked = 0;
    // The last answer, and what reports_acked becomes when the subscriber says it
    // processed it.
    int64_t answer_id = 0;
    int64_t reports_acked_with_answer = 0;
    std::optional<HeldPoll> poll;
    int64_t last_seen_ms = 0;
    int64_t last_report_answer_ms = 0;
  };
  using ReportLog = std::list<std::shared_ptr<const Published>>;

  static bool Batched(const Published& m) { return m.channel_type == rpc::RESOURCE_USAGE_CHANNEL; }
  void PublishReport(std::shared_ptr<const Published> report);
  bool HasReportsFor(const Subscriber& subscriber) const;
  // Reports are waiting for `subscriber` and its report window has passed.
  bool ReportsDue(const Subscriber& subscriber) const;
  // Whether a held poll of `subscriber` should be answered now.
  bool Due(const Subscriber& subscriber) const;
  // Answers carrying reports one FlushBatched() may give (the bound's share of a flush).
  int64_t ReportAnswersPerFlush() const;
  // How long a subscriber waits between answers that carry only reports.
  int64_t BatchWindowMs() const;
  void Answer(Subscriber& subscriber);

  Options options_;
  std::function<int64_t()> now_ms_;
  std::string publisher_id_;
  int64_t next_sequence_id_ = 1;
  int64_t next_answer_id_ = 1;
  absl::flat_hash_map<std::string, Subscriber> subscribers_;
  // Subscribers of the report channel.
  int64_t report_subscribers_ = 0;
  // The newest report of each node, in sequence order, and where each node's is.
  ReportLog reports_;
  absl::flat_hash_map<std::string, ReportLog::iterator> report_of_;
};

}  // namespace manta::gcs
