#include "src/common/event_loop.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <mutex>

#include "absl/container/flat_hash_map.h"

namespace manta {

namespace asio = boost::asio;

struct EventLoop::Impl {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  int64_t slow_handler_warn_ms;
  std::unique_ptr<asio::signal_set> signals;
  mutable std::mutex stats_mu;
  // By the name's pointer (names are literals): no string is built per handler.
  absl::flat_hash_map<const char*, int64_t> stats;

  void RunNamed(const char* name, absl::AnyInvocable<void()>& fn) {
    auto start = std::chrono::steady_clock::now();
    fn();
    auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    if (took_ms > slow_handler_warn_ms) {
      LOG(WARNING) << "slow event-loop handler " << name << " took " << took_ms << " ms";
    }
    std::lock_guard<std::mutex> lock(stats_mu);
    ++stats[name];
  }
};

struct Timer::State {
  asio::steady_timer timer;
  std::atomic<bool> cancelled{false};
  explicit State(asio::io_context& io) : timer(io) {}
};

Timer::~Timer() { Cancel(); }

void Timer::Cancel() {
  if (state_) {
    state_->cancelled = true;
    // steady_timer::cancel is not thread-safe; post it to the timer's executor.
    auto state = state_;
    asio::post(state->timer.get_executor(), [state] { state->timer.cancel(); });
  }
}

EventLoop::EventLoop(int64_t slow_handler_warn_ms) : impl_(std::make_unique<Impl>()) {
  impl_->slow_handler_warn_ms = slow_handler_warn_ms;
}

EventLoop::~EventLoop() {
  // Destroy pending handlers (and the signal set) before the io_context goes away.
  impl_->signals.reset();
}

void EventLoop::Post(const char* name, absl::AnyInvocable<void()> fn) {
  asio::post(impl_->io, [this, name, fn = std::move(fn)]() mutable { impl_->RunNamed(name, fn); });
}

namespace {

// Delays are clamped to about 35 years: in the clock's nanoseconds a delay of more than
// about 292 years overflows, and the timer would fire at once instead of never.
std::chrono::milliseconds ClampedDelay(int64_t delay_ms) {
  constexpr int64_t kMaxDelayMs = int64_t{1} << 40;
  return std::chrono::milliseconds(std::min(delay_ms, kMaxDelayMs));
}

void Arm(EventLoop::Impl* impl, std::shared_ptr<Timer::State> state, const char* name,
         int64_t delay_ms, int64_t period_ms, std::function<void()> fn) {
  state->timer.expires_after(ClampedDelay(delay_ms));
  state->timer.async_wait([impl, state, name, period_ms, fn](const boost::system::error_code& ec) {
    if (ec || state->cancelled) return;
    absl::AnyInvocable<void()> call = fn;
    impl->RunNamed(name, call);
    if (period_ms > 0 && !state->cancelled) Arm(impl, state, name, period_ms, period_ms, fn);
  });
}

}  // namespace

std::unique_ptr<Timer> EventLoop::RunAfter(const char* name, int64_t delay_ms, std::function<void()> fn) {
  auto state = std::make_shared<Timer::State>(impl_->io);
  // Arm on the loop thread: asio timers are not thread-safe.
  Post("Timer.Arm", [impl = impl_.get(), state, name, delay_ms, fn = std::move(fn)]() mutable {
    if (!state->cancelled) Arm(impl, state, name, delay_ms, 0, std::move(fn));
  });
  return std::unique_ptr<Timer>(new Timer(state));
}

std::unique_ptr<Timer> EventLoop::RunEvery(const char* name, int64_t period_ms, std::function<void()> fn) {
  auto state = std::make_shared<Timer::State>(impl_->io);
  Post("Timer.Arm", [impl = impl_.get(), state, name, period_ms, fn = std::move(fn)]() mutable {
    if (!state->cancelled) Arm(impl, state, name, period_ms, period_ms, std::move(fn));
  });
  return std::unique_ptr<Timer>(new Timer(state));
}

void EventLoop::PostAfter(const char* name, int64_t delay_ms, absl::AnyInvocable<void()> fn) {
  if (delay_ms <= 0) {
    Post(name, std::move(fn));
    return;
  }
  auto shared = std::make_shared<absl::AnyInvocable<void()>>(std::move(fn));
  Post("Timer.Arm", [impl = impl_.get(), name, delay_ms, shared] {
    auto timer = std::make_shared<asio::steady_timer>(impl->io);
    timer->expires_after(ClampedDelay(delay_ms));
    timer->async_wait([impl, name, shared, timer](const boost::system::error_code& ec) {
      if (!ec) impl->RunNamed(name, *shared);
    });
  });
}

namespace {
void WaitSignal(asio::signal_set* set, std::function<void(int)> handler) {
  set->async_wait([set, handler](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    handler(signo);
    WaitSignal(set, handler);
  });
}
}  // namespace

void EventLoop::OnTerminationSignal(std::function<void(int)> handler) {
  impl_->signals = std::make_unique<asio::signal_set>(impl_->io, SIGTERM, SIGINT);
  WaitSignal(impl_->signals.get(), std::move(handler));
}

void EventLoop::Run() {
  if (impl_->io.stopped()) return;
  impl_->io.run();
}

void EventLoop::Stop() { impl_->io.stop(); }

bool EventLoop::stopped() const { return impl_->io.stopped(); }

size_t EventLoop::RunUntilIdle() {
  // After a Stop() (e.g. a Run() that a test ended) poll() would run nothing.
  if (impl_->io.stopped()) impl_->io.restart();
  size_t total = 0;
  for (;;) {
    size_t n = impl_->io.poll();
    total += n;
    if (n == 0) break;
  }
  impl_->io.restart();
  return total;
}

std::map<std::string, int64_t> EventLoop::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  std::map<std::string, int64_t> out;
  for (const auto& [name, count] : impl_->stats) out[name] += count;
  return out;
}

void* EventLoop::native_handle() { return &impl_->io; }

}  // namespace manta
