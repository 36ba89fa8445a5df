// GcsSubscriber: the client side of the GCS long-poll pubsub.
//
// Subscribes to a set of channels, and to single keys of channels added and removed
// later (SubscribeKey), and keeps one poll outstanding. Each message is
// handed to `on_message` once, in order. When the GCS restarted (the publisher id
// changed or the GCS forgot this subscriber) it subscribes again and calls
// `on_resync`, because messages may have been lost: the owner re-reads the state it
// needs. Failed polls are retried with backoff. Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "src/common/event_loop.h"
#include "src/gcs/gcs_client.h"

namespace manta::gcs {

// Calls `fn` with each message of a poll's reply (serialized on the wire), parsed on
// one arena freed at the end; one that does not parse is logged and skipped.
void ForEachPubMessage(const rpc::GcsSubscriberPollReply& reply,
                       absl::FunctionRef<void(const rpc::PubMessage&)> fn);
// The same messages, copied out (for tests and tools).
std::vector<rpc::PubMessage> ParsePubMessages(const rpc::GcsSubscriberPollReply& reply);

class GcsSubscriber {
 public:
  GcsSubscriber(EventLoop& loop, GcsClientInterface& gcs, std::vector<rpc::ChannelType> channels,
                int64_t poll_timeout_ms, std::function<void(const rpc::PubMessage&)> on_message,
                std::function<void()> on_resync);
  ~GcsSubscriber();

  void Start();
  // Adds a key of `channel` (e.g. one actor id); `done` (may be null) runs on the
  // loop once the GCS has it, so state read after `done` misses no later message.
  // Kept across GCS restarts. Before Start() the key goes with the first subscribe.
  void SubscribeKey(rpc::ChannelType channel, const std::string& key, std::function<void(absl::Status)> done);
  void UnsubscribeKey(rpc::ChannelType channel, const std::string& key);
  // Called after every poll answer or failure, with its status (for liveness tracking).
  void SetOnPollResult(std::function<void(const absl::Status&)> fn) { on_poll_result_ = std::move(fn); }

 private:
  void Subscribe();
  void Poll();
  void RetryLater(void (GcsSubscriber::*step)());

  EventLoop& loop_;
  GcsClientInterface& gcs_;
  std::vector<rpc::ChannelType> channels_;
  std::set<std::pair<rpc::ChannelType, std::string>> keys_;
  bool started_ = false;
  int64_t poll_timeout_ms_;
  std::function<void(const rpc::PubMessage&)> on_message_;
  std::function<void()> on_resync_;
  std::function<void(const absl::Status&)> on_poll_result_;
  std::string subscriber_id_;
  std::string publisher_id_;
  int64_t max_processed_ = 0;
  int64_t last_answer_id_ = 0;
  int64_t backoff_ms_ = 100;
  // Cleared on destruction so late callbacks do nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::gcs
