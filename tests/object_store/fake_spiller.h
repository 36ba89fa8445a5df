// FakeSpiller: a scriptable in-memory SpillerInterface for ObjectStore tests.
//
// Records every spill and restore request; nothing completes until the test says
// so (CompleteNextSpill / FailNextSpill / CompleteNextRestore / FailNextRestore).
// Completing a spill copies the items' bytes into an in-memory "file" (one per
// batch), so a later restore returns exactly what was spilled. Delete counts the
// live objects per file and drops a file with its last object. Completions run the
// store's callback inline, on the test's thread (which plays the loop).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/object_store/spiller.h"

namespace manta::object_store::testing {

class FakeSpiller : public SpillerInterface {
 public:
  struct SpillRequest {
    std::vector<SpillItem> items;
    absl::AnyInvocable<void(absl::StatusOr<std::vector<SpillLocation>>)> done;
  };
  struct RestoreRequest {
    SpillLocation location;
    uint8_t* dest;
    absl::AnyInvocable<void(absl::Status)> done;
  };

  void SpillAsync(std::vector<SpillItem> items,
                  absl::AnyInvocable<void(absl::StatusOr<std::vector<SpillLocation>>)> done) override {
    ++num_spill_calls_;
    spills_.push_back({std::move(items), std::move(done)});
  }
  void RestoreAsync(const SpillLocation& location, uint8_t* dest,
                    absl::AnyInvocable<void(absl::Status)> done) override {
    restores_.push_back({location, dest, std::move(done)});
  }
  void Delete(const SpillLocation& location) override {
    deleted_.push_back(location);
    auto it = live_objects_per_file_.find(location.path);
    ASSERT_NE(it, live_objects_per_file_.end()) << "Delete of unknown spill file " << location.path;
    if (--it->second == 0) {
      live_objects_per_file_.erase(it);
      files_.erase(location.path);
    }
  }

  // Writes the oldest pending spill batch to a new in-memory file and reports success.
  void CompleteNextSpill() {
    ASSERT_FALSE(spills_.empty()) << "no spill pending";
    SpillRequest request = std::move(spills_.front());
    spills_.pop_front();
    std::string path = "fake_spill_" + std::to_string(next_file_++);
    std::string& file = files_[path];
    std::vector<SpillLocation> locations;
    for (const SpillItem& item : request.items) {
      locations.push_back({path, static_cast<int64_t>(file.size()), item.size});
      file.append(reinterpret_cast<const char*>(item.data), static_cast<size_t>(item.size));
    }
    live_objects_per_file_[path] = static_cast<int64_t>(request.items.size());
    request.done(std::move(locations));
  }
  void FailNextSpill(absl::Status status) {
    ASSERT_FALSE(spills_.empty()) << "no spill pending";
    SpillRequest request = std::move(spills_.front());
    spills_.pop_front();
    request.done(std::move(status));
  }
  // Copies the spilled bytes back into the store's arena and reports success.
  void CompleteNextRestore() {
    ASSERT_FALSE(restores_.empty()) << "no restore pending";
    RestoreRequest request = std::move(restores_.front());
    restores_.pop_front();
    auto it = files_.find(request.location.path);
    ASSERT_NE(it, files_.end()) << "restore from a deleted file";
    ASSERT_LE(request.location.offset + request.location.size, static_cast<int64_t>(it->second.size()));
    std::memcpy(request.dest, it->second.data() + request.location.offset, static_cast<size_t>(request.location.size));
    request.done(absl::OkStatus());
  }
  void FailNextRestore(absl::Status status) {
    ASSERT_FALSE(restores_.empty()) << "no restore pending";
    RestoreRequest request = std::move(restores_.front());
    restores_.pop_front();
    request.done(std::move(status));
  }

  const std::deque<SpillRequest>& pending_spills() const { return spills_; }
  const std::deque<RestoreRequest>& pending_restores() const { return restores_; }
  const std::vector<SpillLocation>& deleted() const { return deleted_; }
  int num_spill_calls() const { return num_spill_calls_; }
  size_t num_files() const { return files_.size(); }

 private:
  std::deque<SpillRequest> spills_;
  std::deque<RestoreRequest> restores_;
  std::vector<SpillLocation> deleted_;
  std::map<std::string, std::string> files_;
  std::map<std::string, int64_t> live_objects_per_file_;
  int num_spill_calls_ = 0;
  int next_file_ = 0;
};

}  // namespace manta::object_store::testing
