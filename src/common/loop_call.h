// Calls into an EventLoop from another thread that wait for the answer.
//
// RunOnLoopAndWait(loop, fn, timeout_ms) runs fn(done) on the loop and waits (at
// most timeout_ms) until fn, or something it started, calls done(status); a
// `done` called after the wait gave up, or a second time, is ignored.
// CallOnLoop<Reply> does the same for an asynchronous call that answers a reply:
// the reply is kept on the heap, so one that comes after the wait gave up is
// dropped, never written to the caller's stack.
// DrainCallbacks(loop, in_flight, timeout_ms), at shutdown: waits until a client's
// cancelled calls have run their callbacks on the loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/common/event_loop.h"

namespace manta {

inline absl::Status RunOnLoopAndWait(EventLoop& loop, const std::function<void(std::function<void(absl::Status)>)>& fn,
                                     int64_t timeout_ms) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::future<absl::Status> future = promise->get_future();
  loop.Post("RunOnLoopAndWait", [fn, promise, done] {
    fn([promise, done](absl::Status s) {
      if (!done->exchange(true)) promise->set_value(std::move(s));
    });
  });
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return absl::DeadlineExceededError("no answer within " + std::to_string(timeout_ms) + " ms");
  }
  return future.get();
}

// Waits (at most timeout_ms) until `in_flight()` is 0, then lets the loop run what
// the last callbacks posted. A client's callbacks are posted to its loop, so they
// must all have run before the loop goes: at shutdown, cancel the calls (they end at
// once), then drain. Not on the loop thread.
inline void DrainCallbacks(EventLoop& loop, const std::function<int64_t()>& in_flight, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  RunOnLoopAndWait(loop, [](std::function<void(absl::Status)> done) { done(absl::OkStatus()); }, 1000).IgnoreError();
}

template <typename Reply>
using ReplyCall = std::function<void(std::function<void(const absl::Status&, Reply&&)>)>;

template <typename Reply>
absl::StatusOr<Reply> CallOnLoop(EventLoop& loop, const ReplyCall<Reply>& call, int64_t timeout_ms) {
  auto reply = std::make_shared<Reply>();
  absl::Status s = RunOnLoopAndWait(
      loop,
      [call, reply](std::function<void(absl::Status)> done) {
        call([reply, done](const absl::Status& status, Reply&& r) {
          if (status.ok()) *reply = std::move(r);
          done(status);
        });
      },
      timeout_ms);
  if (!s.ok()) return s;
  return std::move(*reply);
}

}  // namespace manta
