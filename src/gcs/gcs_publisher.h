// GcsPublisher: long-poll pubsub for node, job, resource, worker and actor events (§10).
//
// A subscriber (identified by a random id) subscribes to channels, or to single keys
// of a channel (one actor id), with a command batch, then polls. A poll returns at once when messages are queued for it, else it
// is held until a message arrives or `poll_timeout_ms` passes (empty reply). The
// subscriber acknowledges by sending the highest sequence id it processed with the
// next poll, so a lost reply is resent. Subscribers silent for
// `subscriber_timeout_ms` are dropped. publisher_id is random per GCS incarnation: a
// subscriber that sees it change knows state was lost and resynchronises.
// Loop thread only; Tick() must be called periodically by the owner.
#pragma once

#include <deque>
#include <functional>
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
  };

  GcsPublisher(Options options, std::function<int64_t()> now_ms);

  // Queues `message` (its channel_type set) for every subscriber of its channel.
  void Publish(rpc::PubMessage message);

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

  const std::string& publisher_id() const { return publisher_id_; }
  size_t num_subscribers() const { return subscribers_.size(); }

 private:
  struct HeldPoll {
    rpc::GcsSubscriberPollReply* reply;
    rpc::SendReply send_reply;
    int64_t since_ms;
  };
  struct Subscriber {
    bool Wants(const rpc::PubMessage& m) const {
      if (channels.count(m.channel_type()) > 0) return true;
      auto it = keys.find(m.channel_type());
      return it != keys.end() && it->second.contains(m.key_id());
    }
    std::set<int> channels;
    // Channel -> the keys subscribed one by one.
    absl::flat_hash_map<int, absl::flat_hash_set<std::string>> keys;
    std::deque<rpc::PubMessage> queue;
    std::optional<HeldPoll> poll;
    int64_t last_seen_ms = 0;
  };

  void Answer(Subscriber& subscriber);

  Options options_;
  std::function<int64_t()> now_ms_;
  std::string publisher_id_;
  int64_t next_sequence_id_ = 1;
  absl::flat_hash_map<std::string, Subscriber> subscribers_;
};

}  // namespace manta::gcs
