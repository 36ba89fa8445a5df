// A Ray C++ style actor class, declared the way Ray's own C++ tests and examples
// declare theirs (factories chosen with RAY_FUNC, a handle kept as a member, a
// factory registered inline in the header). Used by ray_compat_test.cc.
#pragma once

#include <ray/api.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

class Counter {
 public:
  Counter(int init, bool with_exception = false);
  static Counter* FactoryCreate();
  static Counter* FactoryCreateException();
  static Counter* FactoryCreate(int init);
  static Counter* FactoryCreate(int init1, int init2);

  int Plus1();
  int Add(int x);
  int Exit();
  int GetCount() { return count; }
  uint64_t GetPid();
  void ExceptionFunc() { throw std::invalid_argument("error"); }
  static bool IsProcessAlive(uint64_t pid);

  bool CheckRestartInActorCreationTask();
  bool CheckRestartInActorTask();
  ray::ActorHandle<Counter> CreateChildActor(std::string actor_name);
  int Plus1ForActor(ray::ActorHandle<Counter> actor);
  std::string GetNamespaceInActor();
  std::string GetVal(ray::ObjectRef<std::string> obj) { return *obj.Get(); }
  std::vector<std::byte> GetBytes(std::string s) {
    std::vector<std::byte> bytes;
    std::transform(s.begin(), s.end(), std::back_inserter(bytes), [](char c) { return std::byte(c); });
    return bytes;
  }
  int GetIntVal(ray::ObjectRef<ray::ObjectRef<int>> obj) { return *obj.Get()->Get(); }
  bool Initialized() { return ray::IsInitialized(); }
  std::string GetEnvVar(std::string key) {
    const char* value = std::getenv(key.c_str());
    return value == nullptr ? "" : value;
  }

 private:
  int count;
  bool is_restarted = false;
  ray::ActorHandle<Counter> child_actor;
};

inline Counter* CreateCounter() { return new Counter(0); }
RAY_REMOTE(CreateCounter);

// An actor whose calls wait for each other: it needs max_concurrency >= 3.
class ActorConcurrentCall {
 public:
  static ActorConcurrentCall* FactoryCreate() { return new ActorConcurrentCall(); }
  std::string CountDown() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--count_ == 0) cv_.notify_all();
    cv_.wait(lock, [this] { return count_ <= 0; });
    return "ok";
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 3;
};
