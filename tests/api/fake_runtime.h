// FakeRuntime: a scriptable RayRuntime for API unit tests. Records every call;
// Put stores bytes in a map that Get reads back; SubmitTask records the task and
// returns a fresh id; placement groups are recorded (created PENDING, every wait
// answers true, lookups find nothing). Install it with ScopedFakeRuntime (uninstalls
// on exit).
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "src/api/runtime_factory.h"

namespace manta::testing {

class FakeRuntime : public ray::internal::RayRuntime {
 public:
  struct SubmittedTask {
    std::string function_name;
    std::vector<ray::internal::TaskArgument> args;
    ray::internal::TaskOptions options;
  };

  std::string Put(ray::internal::SerializedValue value) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string id = NextId();
    auto bytes = std::make_shared<std::string>(value.size, '\0');
    value.write(bytes->data());
    objects_[id] = bytes;
    contained_[id] = value.contained_ids;
    refs_[id] = 1;
    return id;
  }
  std::vector<ray::internal::ObjectData> Get(const std::vector<std::string>& ids, int64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ray::internal::ObjectData> out;
    for (const std::string& id : ids) {
      auto it = objects_.find(id);
      if (it == objects_.end()) throw ray::internal::RayException("fake: no object");
      out.push_back({it->second->data(), it->second->size(), it->second, ""});
    }
    return out;
  }
  std::vector<bool> Wait(const std::vector<std::string>& ids, int, int64_t, bool) override {
    return std::vector<bool>(ids.size(), true);
  }
  std::vector<std::string> SubmitTask(const std::string& function_name,
                                      std::vector<ray::internal::TaskArgument> args,
                                      const ray::internal::TaskOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back({function_name, std::move(args), options});
    std::vector<std::string> ids;
    for (int i = 0; i < options.num_returns; ++i) {
      ids.push_back(NextId());
      refs_[ids.back()] = 1;
    }
    return ids;
  }
  // Actors: recorded; the fake creates actor ids "actor-<n>" (16 bytes).
  ray::internal::CreatedActor CreateActor(const std::string& factory_name,
                                          std::vector<ray::internal::TaskArgument> args,
                                          const ray::internal::ActorCreationOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back({factory_name, std::move(args), {}});
    created_actors_.push_back(options);
    std::string actor = "actor-" + std::to_string(++next_);
    actor.resize(16, '\0');
    std::string handle = NextId();
    refs_[handle] = 1;
    return {actor, handle};
  }
  std::string SubmitActorTask(const std::string& actor_id, const std::string& handle_object_id,
                              const std::string& method_name, std::vector<ray::internal::TaskArgument> args,
                              const ray::internal::TaskOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back({method_name, std::move(args), options});
    actor_calls_.emplace_back(actor_id, handle_object_id);
    std::string id = NextId();
    refs_[id] = 1;
    return id;
  }
  void KillActor(const std::string& actor_id, bool no_restart) override {
    std::lock_guard<std::mutex> lock(mu_);
    kills_.emplace_back(actor_id, no_restart);
  }
  std::string GetNamedActor(const std::string& name, const std::string&) override {
    return name == "known" ? std::string(16, 'k') : "";
  }
  std::string GetNamespace() override { return "fake-namespace"; }
  ray::internal::PlacementGroupInfo CreatePlacementGroup(const ray::PlacementGroupCreationOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string id = "pg-" + std::to_string(++next_);
    id.resize(18, '\0');
    created_groups_.push_back(options);
    return {id, options, ray::PlacementGroupState::PENDING};
  }
  void RemovePlacementGroup(const std::string& group_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    removed_groups_.push_back(group_id);
  }
  bool WaitPlacementGroupReady(const std::string& group_id, int64_t timeout_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    group_waits_.emplace_back(group_id, timeout_ms);
    return true;
  }
  std::optional<ray::internal::PlacementGroupInfo> GetPlacementGroupById(const std::string&) override {
    return std::nullopt;
  }
  std::optional<ray::internal::PlacementGroupInfo> GetPlacementGroupByName(const std::string&) override {
    return std::nullopt;
  }
  std::vector<ray::internal::PlacementGroupInfo> GetAllPlacementGroups() override { return {}; }
  std::string CurrentActorId() override { return ""; }
  bool WasCurrentActorRestarted() override { return false; }
  void AddLocalReference(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++refs_[id];
  }
  void RemoveLocalReference(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    --refs_[id];
  }
  std::string GetOwnerAddress(const std::string& id) override { return "owner-of-" + id; }
  void RegisterBorrowedRef(const std::string& id, const std::string& owner, const std::string& outer) override {
    std::lock_guard<std::mutex> lock(mu_);
    borrowed_.emplace_back(id, owner, outer);
  }
  bool IsLocalMode() const override { return false; }
  void Cancel(const std::string& object_id, bool force, bool recursive) override {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back({object_id, force, recursive});
  }
  bool IsCancelled() override { return cancelled_; }
  // Every object of the fake is ready at once.
  void NotifyWhenReady(const std::string&, std::function<void()> ready) override { ready(); }
  // Streams: a yielded item's size is recorded (the generator never pauses); Next
  // hands out the ids a test queued with QueueStreamItem, then the end.
  bool StreamYield(ray::internal::SerializedValue item, std::function<void()>) override {
    std::lock_guard<std::mutex> lock(mu_);
    yielded_sizes_.push_back(item.size);
    return true;
  }
  ray::internal::StreamNextResult StreamNext(const std::string& end_id, int64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    ray::internal::StreamNextResult out;
    std::deque<std::string>& items = stream_items_[end_id];
    if (items.empty()) return out;
    out.kind = ray::internal::StreamNextResult::Kind::kItem;
    out.id = std::move(items.front());
    items.pop_front();
    return out;
  }
  void NotifyStreamNext(const std::string&, std::function<void()> ready) override { ready(); }
  void QueueStreamItem(const std::string& end_id, std::string item_id) {
    std::lock_guard<std::mutex> lock(mu_);
    stream_items_[end_id].push_back(std::move(item_id));
  }
  std::vector<size_t> YieldedSizes() {
    std::lock_guard<std::mutex> lock(mu_);
    return yielded_sizes_;
  }
  struct CancelCall {
    std::string object_id;
    bool force;
    bool recursive;
  };
  std::vector<CancelCall> Cancels() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancels_;
  }
  void set_cancelled(bool cancelled) { cancelled_ = cancelled; }

  int Refs(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return refs_.count(id) ? refs_[id] : 0;
  }
  std::vector<std::string> Contained(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return contained_[id];
  }
  std::vector<std::tuple<std::string, std::string, std::string>> Borrowed() {
    std::lock_guard<std::mutex> lock(mu_);
    return borrowed_;
  }
  std::vector<SubmittedTask>& tasks() { return tasks_; }
  std::vector<ray::internal::ActorCreationOptions>& created_actors() { return created_actors_; }
  std::vector<std::pair<std::string, std::string>>& actor_calls() { return actor_calls_; }
  std::vector<std::pair<std::string, bool>>& kills() { return kills_; }
  std::vector<ray::PlacementGroupCreationOptions>& created_groups() { return created_groups_; }
  std::vector<std::string>& removed_groups() { return removed_groups_; }
  std::vector<std::pair<std::string, int64_t>>& group_waits() { return group_waits_; }

 private:
  std::vector<CancelCall> cancels_;
  std::atomic<bool> cancelled_{false};
  std::string NextId() {
    std::string id = "object-" + std::to_string(++next_);
    id.resize(28, '\0');  // binary ids: 28 bytes, trailing NULs
    return id;
  }

  std::mutex mu_;
  int next_ = 0;
  std::map<std::string, std::shared_ptr<std::string>> objects_;
  std::map<std::string, std::vector<std::string>> contained_;
  std::map<std::string, int> refs_;
  std::vector<std::tuple<std::string, std::string, std::string>> borrowed_;
  std::vector<SubmittedTask> tasks_;
  std::vector<ray::internal::ActorCreationOptions> created_actors_;
  std::vector<std::pair<std::string, std::string>> actor_calls_;
  std::vector<std::pair<std::string, bool>> kills_;
  std::vector<ray::PlacementGroupCreationOptions> created_groups_;
  std::vector<std::string> removed_groups_;
  std::vector<std::pair<std::string, int64_t>> group_waits_;
  std::vector<size_t> yielded_sizes_;
  std::map<std::string, std::deque<std::string>> stream_items_;
};

// Installs a FakeRuntime as the process's runtime for the scope's lifetime.
class ScopedFakeRuntime {
 public:
  ScopedFakeRuntime() {
    auto runtime = std::make_unique<FakeRuntime>();
    fake_ = runtime.get();
    ray::internal::InstallRayRuntime(std::move(runtime));
  }
  ~ScopedFakeRuntime() { ray::internal::UninstallRayRuntime(); }
  FakeRuntime& operator*() { return *fake_; }
  FakeRuntime* operator->() { return fake_; }

 private:
  FakeRuntime* fake_;
};

}  // namespace manta::testing
