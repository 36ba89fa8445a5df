// Helpers shared by the GCS tests: a settable clock, a loop driver with a deadline,
// a recorder for the status an RPC handler answers with, status matchers, direct
// reads and writes of a store, and a subscriber that collects what a GcsPublisher
// publishes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_publisher.h"
#include "src/gcs/gcs_subscriber.h"
#include "src/gcs/store_client.h"
#include "test_util/test_util.h"

namespace manta::gcs::testing {

// A clock the test moves by hand.
class FakeClock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : now_ms_(std::make_shared<int64_t>(start_ms)) {}
  std::function<int64_t()> AsFunction() const {
    return [now = now_ms_] { return *now; };
  }
  int64_t now_ms() const { return *now_ms_; }
  void Advance(int64_t ms) { *now_ms_ += ms; }

 private:
  std::shared_ptr<int64_t> now_ms_;
};

// Runs `loop` until `done()` holds or `timeout_ms` passes; returns whether it held.
// Needed when callbacks are posted from another thread (the Redis store).
inline bool RunLoopUntil(EventLoop& loop, const std::function<bool()>& done, int64_t timeout_ms = 10000) {
  return manta::testing::WaitFor(
      [&] {
        loop.RunUntilIdle();
        return done();
      },
      timeout_ms);
}

// Records how an RPC handler answered: how many times, and with which status.
class ReplyRecorder {
 public:
  rpc::SendReply Sender() {
    return [state = state_](absl::Status status) {
      ++state->calls;
      state->status = std::move(status);
    };
  }
  bool replied() const { return state_->calls > 0; }
  int calls() const { return state_->calls; }
  const absl::Status& status() const { return state_->status; }

 private:
  struct State {
    int calls = 0;
    absl::Status status;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Calls `(manager.*handler)(request, reply, send_reply)`, runs the loop until idle
// and returns the status it answered with. Fails the test unless it answered once.
template <typename Manager, typename Request, typename Reply>
absl::Status CallHandler(EventLoop& loop, Manager& manager,
                         void (Manager::*handler)(const Request&, Reply*, rpc::SendReply), const Request& request,
                         Reply* reply) {
  ReplyRecorder recorder;
  (manager.*handler)(request, reply, recorder.Sender());
  loop.RunUntilIdle();
  EXPECT_EQ(recorder.calls(), 1) << "the handler must answer exactly once";
  return recorder.replied() ? recorder.status() : absl::DeadlineExceededError("handler did not answer");
}

// Reads table[key] straight from a store whose callbacks run on `loop` (in-memory).
inline std::optional<std::string> ReadRow(EventLoop& loop, StoreClientInterface& store, const std::string& table,
                                          const std::string& key) {
  std::optional<std::string> row;
  bool done = false;
  store.AsyncGet(table, key, [&](absl::StatusOr<std::optional<std::string>> r) {
    done = true;
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) row = *r;
  });
  loop.RunUntilIdle();
  EXPECT_TRUE(done);
  return row;
}

// Reads a whole table straight from a store whose callbacks run on `loop`.
inline absl::flat_hash_map<std::string, std::string> ReadTable(EventLoop& loop, StoreClientInterface& store,
                                                               const std::string& table) {
  absl::flat_hash_map<std::string, std::string> rows;
  bool done = false;
  store.AsyncGetAll(table, [&](absl::StatusOr<absl::flat_hash_map<std::string, std::string>> r) {
    done = true;
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) rows = *r;
  });
  loop.RunUntilIdle();
  EXPECT_TRUE(done);
  return rows;
}

// Writes table[key] = value straight into a store whose callbacks run on `loop`.
inline void WriteRow(EventLoop& loop, StoreClientInterface& store, const std::string& table, const std::string& key,
                     const std::string& value) {
  bool done = false;
  store.AsyncPut(table, key, value, /*overwrite=*/true, [&](absl::StatusOr<bool> r) {
    done = true;
    EXPECT_TRUE(r.ok()) << r.status();
  });
  loop.RunUntilIdle();
  EXPECT_TRUE(done);
}

// A subscriber of `publisher` that collects what is published on its channels.
class PublishedMessages {
 public:
  PublishedMessages(GcsPublisher& publisher, const std::vector<rpc::ChannelType>& channels)
      : publisher_(publisher) {
    rpc::GcsSubscriberCommandBatchRequest request;
    request.set_subscriber_id(kSubscriberId);
    for (rpc::ChannelType channel : channels) request.add_commands()->set_channel_type(channel);
    EXPECT_TRUE(publisher_.HandleCommandBatch(request).ok());
  }

  // Messages published since the last call, oldest first.
  std::vector<rpc::PubMessage> TakeNew() {
    rpc::GcsSubscriberPollRequest request;
    request.set_subscriber_id(kSubscriberId);
    request.set_max_processed_sequence_id(acked_);
    request.set_publisher_id(publisher_.publisher_id());
    rpc::GcsSubscriberPollReply reply;
    ReplyRecorder recorder;
    publisher_.HandlePoll(request, &reply, recorder.Sender());
    if (!recorder.replied()) publisher_.FlushAll();  // nothing queued: release the held poll
    EXPECT_TRUE(recorder.status().ok()) << recorder.status();
    std::vector<rpc::PubMessage> messages = ParsePubMessages(reply);
    if (!messages.empty()) acked_ = messages.back().sequence_id();
    return messages;
  }

 private:
  static constexpr char kSubscriberId[] = "test-subscriber";
  GcsPublisher& publisher_;
  int64_t acked_ = 0;
};

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// Matches an OK absl::StatusOr whose value matches `expected` (a value or a matcher).
MATCHER_P(IsOkAndHolds, expected, "is OK and holds a matching value") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  if (::testing::ExplainMatchResult(expected, *arg, result_listener)) return true;
  *result_listener << " (holds " << ::testing::PrintToString(*arg) << ")";
  return false;
}

// Matches an OK absl::Status or absl::StatusOr.
MATCHER(IsOk, "is OK") {
  *result_listener << "status is " << GetStatus(arg);
  return GetStatus(arg).ok();
}

// Matches an absl::Status or absl::StatusOr with the given code.
MATCHER_P(StatusIs, code, "has status code " + absl::StatusCodeToString(code)) {
  *result_listener << "status is " << GetStatus(arg);
  return GetStatus(arg).code() == code;
}

// Matches an absl::Status or absl::StatusOr with the given code whose message
// contains `text`.
MATCHER_P2(StatusIs, code, text,
           "has status code " + absl::StatusCodeToString(code) + " and a message containing '" +
               std::string(text) + "'") {
  *result_listener << "status is " << GetStatus(arg);
  return GetStatus(arg).code() == code && GetStatus(arg).message().find(text) != absl::string_view::npos;
}

}  // namespace manta::gcs::testing
