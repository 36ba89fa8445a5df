// Coroutines over futures (a Manta addition: Ray's C++ API blocks a thread per Get).
//
//   ray::Coroutine<int> Sum(ray::ObjectRef<int> a, ray::ObjectRef<int> b) {
//     std::shared_ptr<int> x = co_await a;  // no thread waits meanwhile
//     std::shared_ptr<int> y = co_await b;
//     co_return *x + *y;
//   }
//   int total = ray::RunAsync(Sum(ray::Task(F).Remote(1), ray::Task(F).Remote(2)));
//
// - ray::Coroutine<T>: a coroutine returning T (void by default). It starts when
//   awaited (`co_await Sub()` from another coroutine) or run (RunAsync, Spawn), and
//   passes its exception, if any, to whoever awaits it.
// - `co_await ref` (an ObjectRef<T>): suspends until the object is ready here (its
//   value or error readable without waiting; an object stored on another node is
//   pulled first), then gives what ref.Get() gives: a shared_ptr<T>, or throws the
//   object's error (RayTaskException, RayTaskCancelledException, ...).
// - Combinators (ray/api/when.h): co_await ray::WhenAll(refs) (every value, in order; the first error
//   in order throws), ray::WhenAny(refs) (the index of a ready one), and
//   ray::WaitAsync(refs, n) (the coroutine form of ray::Wait: a WaitResult once n are
//   ready).
// - Where coroutines run: ray::RunAsync(c) runs c, and everything it awaits, on the
//   calling thread until it finishes, and returns its result. ray::Spawn(executor, c)
//   starts c on an Executor of yours (ray::ThreadPoolExecutor's, an asio::io_context:
//   ray::Executor([&io](auto fn) { asio::post(io, std::move(fn)); })) and returns a
//   std::future. A coroutine resumes on the executor it was started on.
// - A remote function may itself be a coroutine: RAY_REMOTE'd `ray::Coroutine<T> F()`
//   is called as any task (ray::Task(F).Remote() gives an ObjectRef<T>), and its
//   worker runs it with RunAsync.
//
// Awaits cost no thread: 100,000 of them may be outstanding on one RunAsync thread.
// An await that is never satisfied (its task never finishes) keeps its coroutine
// until ray::Shutdown, when every await resumes with an error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ray/api/executor.h"
#include "ray/api/object_ref.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"

namespace ray {

template <typename T = void>
class Coroutine;

namespace internal {

// The executor whose coroutine the calling thread is running (null: none).
inline std::shared_ptr<const Executor>& CurrentExecutor() {
  static thread_local std::shared_ptr<const Executor> current;
  return current;
}

// Makes `executor` the calling thread's current one while alive.
class ScopedExecutor {
 public:
  explicit ScopedExecutor(std::shared_ptr<const Executor> executor)
      : previous_(std::exchange(CurrentExecutor(), std::move(executor))) {}
  ~ScopedExecutor() { CurrentExecutor() = std::move(previous_); }
  ScopedExecutor(const ScopedExecutor&) = delete;
  ScopedExecutor& operator=(const ScopedExecutor&) = delete;

 private:
  std::shared_ptr<const Executor> previous_;
};

// Resumes `handle` on `executor` (as its current executor there).
inline void ResumeOn(const std::shared_ptr<const Executor>& executor, std::coroutine_handle<> handle) {
  executor->Post([executor, handle] {
    ScopedExecutor scope(executor);
    handle.resume();
  });
}

// What an await needs before it suspends: the executor to resume on and the runtime.
struct AwaitContext {
  std::shared_ptr<const Executor> executor;
  RayRuntime* runtime = nullptr;
};
inline AwaitContext ContextForAwait(const char* what) {
  AwaitContext context{CurrentExecutor(), GetRayRuntime()};
  if (context.executor == nullptr) {
    throw RayException(std::string(what) +
                       ": co_await outside ray::RunAsync and ray::Spawn (no executor to resume the coroutine on)");
  }
  if (context.runtime == nullptr) {
    throw RayException(std::string(what) + ": ray::Init() has not been called (or ray::Shutdown() has)");
  }
  return context;
}

// The result of a finished coroutine: its value or its exception.
template <typename T>
class Outcome {
 public:
  template <typename U>
  void Set(U&& value) {
    value_.emplace(std::forward<U>(value));
  }
  void Fail(std::exception_ptr error) { error_ = std::move(error); }
  T Take() {
    if (error_) std::rethrow_exception(error_);
    return std::move(*value_);
  }
  void Fulfil(std::promise<T>& promise) {
    if (error_) {
      promise.set_exception(error_);
    } else {
      promise.set_value(std::move(*value_));
    }
  }

 private:
  std::optional<T> value_;
  std::exception_ptr error_;
};

template <>
class Outcome<void> {
 public:
  void Set() {}
  void Fail(std::exception_ptr error) { error_ = std::move(error); }
  void Take() {
    if (error_) std::rethrow_exception(error_);
  }
  void Fulfil(std::promise<void>& promise) {
    if (error_) {
      promise.set_exception(error_);
    } else {
      promise.set_value();
    }
  }

 private:
  std::exception_ptr error_;
};

template <typename T>
struct PromiseCommon {
  std::coroutine_handle<> continuation;  // the awaiting coroutine, resumed at the end
  Outcome<T> outcome;

  std::suspend_always initial_suspend() noexcept { return {}; }
  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
      std::coroutine_handle<> next = self.promise().continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() { outcome.Fail(std::current_exception()); }
};

template <typename T>
struct PromiseReturn : PromiseCommon<T> {
  template <typename U = T>
  void return_value(U&& value) {
    this->outcome.Set(std::forward<U>(value));
  }
};
template <>
struct PromiseReturn<void> : PromiseCommon<void> {
  void return_void() { outcome.Set(); }
};

// A coroutine nobody awaits: starts at once, frees itself at its end.
struct Detached {
  struct promise_type {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

// Runs `coroutine` from the calling thread, then `done(outcome)` where it finished.
template <typename T, typename Done>
Detached StartDetached(Coroutine<T> coroutine, Done done) {
  Outcome<T> outcome;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(coroutine);
      outcome.Set();
    } else {
      outcome.Set(co_await std::move(coroutine));
    }
  } catch (...) {
    outcome.Fail(std::current_exception());
  }
  done(std::move(outcome));
}

// RunAsync's executor: a queue the calling thread drains until stopped.
class ThreadLoop {
 public:
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  // Runs what is posted until Stop() was called and nothing is queued.
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
};

// co_await on a lazy coroutine (a ray::Coroutine or ray::Generator, whose promise is
// Promise): runs it; the awaiter resumes when it finishes, with its value (T) or
// its exception. A coroutine runs once: await it (or run it) once.
template <typename Promise, typename T>
class HandleAwaiter {
 public:
  explicit HandleAwaiter(std::coroutine_handle<Promise> handle) : handle_(handle) {}
  bool await_ready() const {
    if (!handle_) throw RayException("co_await on an empty ray::Coroutine or ray::Generator (moved from)");
    return handle_.done();
  }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
    handle_.promise().continuation = awaiting;
    return handle_;
  }
  T await_resume() { return handle_.promise().outcome.Take(); }

 private:
  std::coroutine_handle<Promise> handle_;
};

template <typename T>
struct IsCoroutine : std::false_type {};
template <typename T>
struct IsCoroutine<Coroutine<T>> : std::true_type {
  using ValueType = T;
};

}  // namespace internal

template <typename T>
class [[nodiscard]] Coroutine {
 public:
  struct promise_type : internal::PromiseReturn<T> {
    Coroutine get_return_object() { return Coroutine(std::coroutine_handle<promise_type>::from_promise(*this)); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Coroutine(Coroutine&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Coroutine& operator=(Coroutine&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Coroutine(const Coroutine&) = delete;
  Coroutine& operator=(const Coroutine&) = delete;
  ~Coroutine() {
    if (handle_) handle_.destroy();
  }

  // Awaiting a coroutine runs it; the awaiter resumes when it finishes, with its
  // value or its exception. A coroutine runs once: await it (or run it) once.
  using Awaiter = internal::HandleAwaiter<promise_type, T>;
  Awaiter operator co_await() && { return Awaiter(handle_); }

 private:
  explicit Coroutine(Handle handle) : handle_(handle) {}
  Handle handle_;
};

// Runs `coroutine` on the calling thread until it finishes; returns its value or
// throws its exception. Everything it awaits resumes on this thread. May be nested
// (a coroutine calling RunAsync blocks its own executor meanwhile).
template <typename T>
T RunAsync(Coroutine<T> coroutine) {
  auto loop = std::make_shared<internal::ThreadLoop>();
  auto executor = std::make_shared<const Executor>([loop](std::function<void()> fn) { loop->Post(std::move(fn)); });
  internal::Outcome<T> result;
  {
    internal::ScopedExecutor scope(executor);
    internal::StartDetached(std::move(coroutine), [&result, loop](internal::Outcome<T> outcome) {
      result = std::move(outcome);
      loop->Stop();
    });
  }
  loop->Run();
  return result.Take();
}

// Starts `coroutine` on `executor` and returns at once; the future gets its value
// or exception.
template <typename T>
std::future<T> Spawn(Executor executor, Coroutine<T> coroutine) {
  auto shared = std::make_shared<const Executor>(std::move(executor));
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();
  auto start = std::make_shared<Coroutine<T>>(std::move(coroutine));
  shared->Post([shared, promise, start] {
    internal::ScopedExecutor scope(shared);
    internal::StartDetached(std::move(*start),
                            [promise](internal::Outcome<T> outcome) { outcome.Fulfil(*promise); });
  });
  return future;
}

namespace internal {

// co_await on an ObjectRef<T>: see the top of this file.
template <typename T>
class ObjectRefAwaiter {
 public:
  explicit ObjectRefAwaiter(const ObjectRef<T>& ref) : ref_(ref) {}
  bool await_ready() const noexcept { return ref_.IsNil(); }  // Get throws for a nil ref
  void await_suspend(std::coroutine_handle<> handle) {
    AwaitContext context = ContextForAwait("co_await ObjectRef");
    // Nothing of this awaiter is touched once registered: the coroutine may already
    // be running again on another thread of its executor.
    context.runtime->NotifyWhenReady(ref_.ID(), [executor = std::move(context.executor), handle] {
      ResumeOn(executor, handle);
    });
  }
  auto await_resume() const { return ref_.Get(); }

 private:
  const ObjectRef<T>& ref_;  // the co_await's operand: alive until it resumes
};

}  // namespace internal

template <typename T>
internal::ObjectRefAwaiter<T> operator co_await(const ObjectRef<T>& ref) {
  return internal::ObjectRefAwaiter<T>(ref);
}

}  // namespace ray

#include "ray/api/when.h"       // WhenAll, WhenAny, WaitAsync
#include "ray/api/generator.h"  // Generator, ObjectRefGenerator
