// EventLoop: the one thread that owns a component's state (ARCHITECTURE.md §12).
//
// A thin wrapper over boost::asio::io_context (hidden behind a pimpl so that this
// header stays cheap to include). Other threads hand work to the loop with Post();
// every posted handler carries a name that appears in slow-handler warnings and in
// Stats(); names are string literals (they are kept for the loop's life). Timers run
// their callback on the loop. Post() and the timer calls are thread-safe; Run() is
// called by exactly one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"

namespace manta {

class EventLoop;

// A one-shot or periodic timer bound to a loop. Destroying it or calling Cancel()
// guarantees the callback does not run afterwards (when called on the loop thread).
class Timer {
 public:
  ~Timer();
  void Cancel();

 // Implementation detail, public only so the loop's .cc can name it.
  struct State;

 private:
  friend class EventLoop;
  explicit Timer(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class EventLoop {
 public:
  // `slow_handler_warn_ms`: handlers running longer are logged with their name.
  explicit EventLoop(int64_t slow_handler_warn_ms = 100);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs `fn` on the loop thread. Thread-safe.
  void Post(const char* name, absl::AnyInvocable<void()> fn);
  // Runs `fn` on the loop after `delay_ms`; cannot be cancelled. Thread-safe.
  void PostAfter(const char* name, int64_t delay_ms, absl::AnyInvocable<void()> fn);
  // Runs `fn` on the loop after `delay_ms`. Keep the Timer to be able to cancel.
  std::unique_ptr<Timer> RunAfter(const char* name, int64_t delay_ms, std::function<void()> fn);
  // Runs `fn` on the loop every `period_ms` until the Timer is destroyed.
  std::unique_ptr<Timer> RunEvery(const char* name, int64_t period_ms, std::function<void()> fn);

  // Runs `handler(signal)` on the loop when SIGTERM or SIGINT arrives (repeatedly).
  // REQUIRES: called once, before Run().
  void OnTerminationSignal(std::function<void(int)> handler);

  // Runs handlers until Stop(). Blocks the calling thread.
  void Run();
  // Makes Run() return soon. Thread-safe.
  void Stop();
  // Runs every handler that is ready now (and those they post), then returns.
  // For tests that drive the loop themselves. Returns the number of handlers run.
  // Runs even after an earlier Stop(); a Stop() from one of its handlers ends it early.
  size_t RunUntilIdle();
  bool stopped() const;

  // Handler name -> number of runs, for debugging.
  std::map<std::string, int64_t> Stats() const;

  // The io_context, as void*, for code that needs asio directly (gRPC-free sockets).
  void* native_handle();

  // Implementation detail, public only so the loop's .cc can name it.
  struct Impl;

 private:
  friend class Timer;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta
