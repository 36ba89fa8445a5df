// Streaming: tasks and actor methods that yield values as they make them (a Manta
// addition in the spirit of Ray's generators and ObjectRefGenerator).
//
//   ray::Generator<int> Countdown(int n) {
//     for (int i = n; i > 0; --i) co_yield i;  // each item reaches the caller now
//   }
//   RAY_REMOTE(Countdown);
//
//   ray::ObjectRefGenerator<int> stream = ray::Task(Countdown).Remote(3);
//   for (ray::ObjectRef<int> ref : stream) std::cout << *ray::Get(ref);  // 3 2 1
//
// - ray::Generator<T>: a coroutine that `co_yield`s values of T (and may co_await
//   refs, like a ray::Coroutine). A RAY_REMOTE'd function or actor method returning
//   it is called as any other; Remote returns a ray::ObjectRefGenerator<T>.
// - Each yielded value becomes an object owned by the caller, as a return would
//   (kept in the caller's process or in the node's store by size, freed when its
//   last ObjectRef goes). It is sent to the caller as soon as it is yielded.
// - ray::ObjectRefGenerator<T>: the caller's side. Next() waits for the next item and
//   returns its ObjectRef<T>, or std::nullopt once the task finished and every item
//   was taken; a range-for iterates the same way, and in a coroutine
//   `co_await stream.NextAsync()` waits without a thread. Items come in the order
//   they were yielded, each once (copies of a generator share one stream).
// - Failure: when the task fails part way (its function throws, its worker dies and
//   no retry is left, it is cancelled), the consumer gets every item yielded before,
//   then one ref whose Get throws the error, then the end. When its worker dies and
//   a retry is left, the task runs again and yields from its first item again; the
//   items the caller already received are not delivered twice (the task must yield
//   the same items when run again, as for any retried task).
// - Back-pressure: with SetGeneratorBackpressureNumObjects(n) on the caller (Ray's
//   _generator_backpressure_num_objects), the task pauses at its co_yield while n of
//   its items are unconsumed (taken by Next) and goes on as the consumer takes them.
//   Without it (the default, as in Ray), the task never waits for the consumer.
// - Dropping every copy of the ObjectRefGenerator (and Completed()'s refs) releases
//   the items not taken; the task runs on, its further items dropped.
// - ray::Cancel(stream) cancels the task: a paused or running generator stops at its
//   next co_yield (which throws RayTaskCancelledException).
// - Completed(): the ref of the stream's end: its Get waits until the task finished
//   and gives the number of items it yielded (or throws its error).
#pragma once

#include <coroutine>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "ray/api/coroutine.h"
#include "ray/api/object_ref.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/returns.h"
#include "ray/api/serializer.h"

namespace ray {

template <typename T>
class Generator;
template <typename T>
class ObjectRefGenerator;

namespace internal {

template <typename T>
struct IsGenerator : std::false_type {};
template <typename T>
struct IsGenerator<Generator<T>> : std::true_type {
  using ValueType = T;
};

// co_yield: hands the item to the runtime; suspends only when back-pressure pauses
// the generator. After a cancel every co_yield throws RayTaskCancelledException.
class YieldAwaiter {
 public:
  explicit YieldAwaiter(SerializedValue item) : item_(std::move(item)) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> handle) {
    AwaitContext context = ContextForAwait("co_yield");
    runtime_ = context.runtime;
    // Nothing of this awaiter is touched once the runtime may resume the generator.
    return !runtime_->StreamYield(std::move(item_), [executor = std::move(context.executor), handle] {
      ResumeOn(executor, handle);
    });
  }
  void await_resume() const {
    if (runtime_ != nullptr && runtime_->IsCancelled()) {
      throw RayTaskCancelledException("co_yield: the generator's task was cancelled (ray::Cancel)");
    }
  }

 private:
  SerializedValue item_;
  RayRuntime* runtime_ = nullptr;
};

}  // namespace internal

template <typename T>
class [[nodiscard]] Generator {
 public:
  struct promise_type : internal::PromiseReturn<void> {
    Generator get_return_object() { return Generator(std::coroutine_handle<promise_type>::from_promise(*this)); }
    template <typename U = T>
    internal::YieldAwaiter yield_value(U&& value) {
      ++yielded;
      return internal::YieldAwaiter(internal::SerializeShared<T>(std::make_shared<const T>(std::forward<U>(value))));
    }
    int64_t yielded = 0;
  };
  using Handle = std::coroutine_handle<promise_type>;

  Generator(Generator&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Generator& operator=(Generator&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator() {
    if (handle_) handle_.destroy();
  }

  // Awaiting a generator runs it to its end (its items go to the stream of the task
  // running it); the runtime does this for a remote generator.
  internal::HandleAwaiter<promise_type, void> operator co_await() && {
    return internal::HandleAwaiter<promise_type, void>(handle_);
  }
  // The items it yielded so far.
  int64_t NumYielded() const { return handle_ ? handle_.promise().yielded : 0; }

 private:
  explicit Generator(Handle handle) : handle_(handle) {}
  Handle handle_;
};

template <typename T>
class ObjectRefGenerator {
 public:
  ObjectRefGenerator() = default;
  // Adopts the local reference carried by `end_id` (the runtime's SubmitTask result).
  ObjectRefGenerator(std::string end_id, internal::AdoptReference adopt) : end_(std::move(end_id), adopt) {}

  // The next item's ref, waiting for it (at most `timeout_ms`; -1: for ever, else
  // RayTimeoutException); std::nullopt once the stream ended. See the top of this file.
  std::optional<ObjectRef<T>> Next(int64_t timeout_ms = -1) {
    if (end_.IsNil()) throw internal::RayException("ObjectRefGenerator::Next on an empty generator");
    internal::RayRuntime* runtime = internal::RequireRuntime("ObjectRefGenerator::Next");
    internal::StreamNextResult next = runtime->StreamNext(end_.ID(), timeout_ms);
    if (next.kind == internal::StreamNextResult::Kind::kEnd) return std::nullopt;
    return ObjectRef<T>(std::move(next.id), internal::AdoptReference{});
  }

  // co_await stream.NextAsync(): Next() without a thread waiting.
  class NextAwaiter {
   public:
    explicit NextAwaiter(ObjectRefGenerator* stream) : stream_(stream) {}
    bool await_ready() const noexcept { return stream_->end_.IsNil(); }  // Next throws
    void await_suspend(std::coroutine_handle<> handle) {
      internal::AwaitContext context = internal::ContextForAwait("co_await ObjectRefGenerator::NextAsync()");
      context.runtime->NotifyStreamNext(stream_->end_.ID(), [executor = std::move(context.executor), handle] {
        internal::ResumeOn(executor, handle);
      });
    }
    std::optional<ObjectRef<T>> await_resume() { return stream_->Next(); }

   private:
    ObjectRefGenerator* stream_;
  };
  NextAwaiter NextAsync() { return NextAwaiter(this); }

  // The stream's end: Get gives the number of items yielded once the task finished.
  const ObjectRef<int64_t>& Completed() const { return end_; }

  // Range-for: each item's ref in order (Next()).
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = ObjectRef<T>;
    using difference_type = std::ptrdiff_t;
    using pointer = const ObjectRef<T>*;
    using reference = const ObjectRef<T>&;
    iterator() = default;
    explicit iterator(ObjectRefGenerator* stream) : stream_(stream) { ++*this; }
    reference operator*() const { return *current_; }
    pointer operator->() const { return &*current_; }
    iterator& operator++() {
      current_ = stream_->Next();
      if (!current_) stream_ = nullptr;
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(const iterator& other) const { return stream_ == other.stream_; }

   private:
    ObjectRefGenerator* stream_ = nullptr;
    std::optional<ObjectRef<T>> current_;
  };
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  ObjectRef<int64_t> end_;
};

namespace internal {

// What the worker runs for a remote generator: the generator to its end; its value
// is the number of items it yielded.
template <typename T>
Coroutine<int64_t> DriveGenerator(Generator<T> generator) {
  co_await std::move(generator);
  co_return generator.NumYielded();
}

template <typename T>
struct RemoteResult<Generator<T>> {
  using Type = ObjectRefGenerator<T>;
};

}  // namespace internal

}  // namespace ray
