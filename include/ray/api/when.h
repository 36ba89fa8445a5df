// The combinators of coroutines (ray/api/coroutine.h, which includes this file):
// co_await ray::WhenAll(refs), ray::WhenAll(coroutines), ray::WhenAny(refs) and
// ray::WaitAsync(refs, n).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ray/api/coroutine.h"
#include "ray/api/object_ref.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/wait_result.h"

namespace ray {
namespace internal {

// Counts the objects of a combinator found ready; remembers the first.
struct ReadyCount {
  explicit ReadyCount(size_t needed) : left(needed) {}
  // Records that position `i` is ready; true for the one call that completes the count.
  bool Arrive(size_t i) {
    int64_t none = -1;
    first.compare_exchange_strong(none, static_cast<int64_t>(i));
    size_t n = left.load();
    while (n > 0 && !left.compare_exchange_weak(n, n - 1)) {
    }
    return n == 1;
  }
  std::atomic<size_t> left;
  std::atomic<int64_t> first{-1};
};

// The combinators' common part: suspends until `needed` of `refs` are ready.
template <typename T>
class RefsAwaiter {
 public:
  static constexpr size_t kAll = static_cast<size_t>(-1);
  // `needed`: how many must be ready (kAll: every one).
  RefsAwaiter(std::vector<ObjectRef<T>> refs, size_t needed, const char* what)
      : refs_(std::move(refs)), needed_(needed == kAll ? refs_.size() : needed), what_(what) {
    for (const ObjectRef<T>& ref : refs_) {
      if (ref.IsNil()) throw RayException(std::string(what) + ": a nil ObjectRef in the list");
    }
    if (needed_ > refs_.size()) {
      throw RayException(std::string(what) + ": waiting for " + std::to_string(needed_) + " of " +
                         std::to_string(refs_.size()) + " objects");
    }
  }
  bool await_ready() const noexcept { return needed_ == 0; }
  void await_suspend(std::coroutine_handle<> handle) {
    AwaitContext context = ContextForAwait(what_);
    count_ = std::make_shared<ReadyCount>(needed_);
    std::vector<std::string> ids = Ids();
    // Nothing of this awaiter is touched once the last is registered (see above).
    for (size_t i = 0; i < ids.size(); ++i) {
      context.runtime->NotifyWhenReady(ids[i], [count = count_, executor = context.executor, handle, i] {
        if (count->Arrive(i)) ResumeOn(executor, handle);
      });
    }
  }

 protected:
  std::vector<std::string> Ids() const {
    std::vector<std::string> ids;
    ids.reserve(refs_.size());
    for (const ObjectRef<T>& ref : refs_) ids.push_back(ref.ID());
    return ids;
  }

  std::vector<ObjectRef<T>> refs_;
  size_t needed_;
  const char* what_;
  std::shared_ptr<ReadyCount> count_;
};

template <typename T>
class AllAwaiter : public RefsAwaiter<T> {
 public:
  explicit AllAwaiter(std::vector<ObjectRef<T>> refs)
      : RefsAwaiter<T>(std::move(refs), RefsAwaiter<T>::kAll, "ray::WhenAll") {}
  auto await_resume() const {
    if constexpr (std::is_void_v<T>) {
      for (const ObjectRef<T>& ref : this->refs_) ref.Get();
    } else {
      std::vector<std::shared_ptr<T>> values;
      values.reserve(this->refs_.size());
      for (const ObjectRef<T>& ref : this->refs_) values.push_back(ref.Get());
      return values;
    }
  }
};

template <typename T>
class AnyAwaiter : public RefsAwaiter<T> {
 public:
  explicit AnyAwaiter(std::vector<ObjectRef<T>> refs) : RefsAwaiter<T>(std::move(refs), 1, "ray::WhenAny") {}
  size_t await_resume() const { return static_cast<size_t>(this->count_->first.load()); }
};

template <typename T>
class WaitAwaiter : public RefsAwaiter<T> {
 public:
  WaitAwaiter(std::vector<ObjectRef<T>> refs, size_t num_objects)
      : RefsAwaiter<T>(std::move(refs), num_objects, "ray::WaitAsync") {}
  WaitResult<T> await_resume() const {
    RayRuntime* runtime = GetRayRuntime();
    if (runtime == nullptr) throw RayException("ray::WaitAsync: ray::Shutdown() was called while waiting");
    std::vector<bool> ready = runtime->Wait(this->Ids(), static_cast<int>(this->needed_), 0, false);
    std::list<ObjectRef<T>> ready_refs, unready_refs;
    for (size_t i = 0; i < this->refs_.size(); ++i) (ready[i] ? ready_refs : unready_refs).push_back(this->refs_[i]);
    return WaitResult<T>(std::move(ready_refs), std::move(unready_refs));
  }
};

// co_await ray::WhenAll(coroutines): runs them all at once on the awaiting
// coroutine's executor; resumes when every one finished.
template <typename T>
class CoroutinesAwaiter {
 public:
  explicit CoroutinesAwaiter(std::vector<Coroutine<T>> coroutines) : coroutines_(std::move(coroutines)) {}
  bool await_ready() const noexcept { return coroutines_.empty(); }
  bool await_suspend(std::coroutine_handle<> handle) {
    AwaitContext context = ContextForAwait("ray::WhenAll");
    shared_ = std::make_shared<Shared>(coroutines_.size());
    // One count more than there are coroutines, given back below: none of them can
    // resume the awaiting coroutine before all were started.
    for (size_t i = 0; i < coroutines_.size(); ++i) {
      StartDetached(std::move(coroutines_[i]),
                    [shared = shared_, executor = context.executor, handle, i](Outcome<T> outcome) {
                      shared->outcomes[i] = std::move(outcome);
                      if (shared->left.fetch_sub(1) == 1) ResumeOn(executor, handle);
                    });
    }
    return shared_->left.fetch_sub(1) != 1;  // all finished already: go on at once
  }
  auto await_resume() {
    if constexpr (std::is_void_v<T>) {
      if (shared_ != nullptr) {
        for (Outcome<T>& outcome : shared_->outcomes) outcome.Take();
      }
    } else {
      std::vector<T> values;
      if (shared_ == nullptr) return values;
      values.reserve(shared_->outcomes.size());
      for (Outcome<T>& outcome : shared_->outcomes) values.push_back(outcome.Take());
      return values;
    }
  }

 private:
  struct Shared {
    explicit Shared(size_t n) : left(n + 1), outcomes(n) {}
    std::atomic<size_t> left;
    std::vector<Outcome<T>> outcomes;
  };
  std::vector<Coroutine<T>> coroutines_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace internal

// co_await ray::WhenAll(refs): the values of all (shared_ptr<T> each, in order; for
// ObjectRef<void>, nothing), once every one is ready; the first error in order throws.
template <typename T>
internal::AllAwaiter<T> WhenAll(std::vector<ObjectRef<T>> refs) {
  return internal::AllAwaiter<T>(std::move(refs));
}

// co_await ray::WhenAll(coroutines): runs the coroutines concurrently on the
// awaiting one's executor (each until its first await, then as its awaits complete)
// and gives their values in order (nothing for Coroutine<void>) once all finished;
// the first exception in order is thrown, after all finished.
template <typename T>
internal::CoroutinesAwaiter<T> WhenAll(std::vector<Coroutine<T>> coroutines) {
  return internal::CoroutinesAwaiter<T>(std::move(coroutines));
}

// co_await ray::WhenAny(refs): the position of an object that is ready (the first
// found ready). Read it with co_await refs[i] or refs[i].Get().
template <typename T>
internal::AnyAwaiter<T> WhenAny(std::vector<ObjectRef<T>> refs) {
  if (refs.empty()) throw internal::RayException("ray::WhenAny: no objects to wait for");
  return internal::AnyAwaiter<T>(std::move(refs));
}

// co_await ray::WaitAsync(refs, num_objects): ray::Wait without a thread waiting:
// once num_objects of refs are ready, a WaitResult as ray::Wait gives (at least
// num_objects ready; both lists in the order of refs).
template <typename T>
internal::WaitAwaiter<T> WaitAsync(std::vector<ObjectRef<T>> refs, size_t num_objects) {
  return internal::WaitAwaiter<T>(std::move(refs), num_objects);
}

}  // namespace ray
