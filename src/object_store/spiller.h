// Spilling objects to disk and reading them back (ARCHITECTURE §8).
//
// SpillerInterface is what the object store needs; FileSpiller implements it with
// files in a spill directory, one file per batch, written and read on a small thread
// pool so the raylet loop never blocks on disk. A file is deleted when every object
// in it was deleted. Callbacks are posted to the owner's loop. Methods: loop thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"

namespace manta::object_store {

// Where a spilled object's bytes live.
struct SpillLocation {
  std::string path;
  int64_t offset = 0;
  int64_t size = 0;
  std::string ToUrl() const { return path + "?offset=" + std::to_string(offset) + "&size=" + std::to_string(size); }
};

struct SpillItem {
  ObjectID id;
  const uint8_t* data;  // stays valid until the callback (the store holds the object)
  int64_t size;
};

class SpillerInterface {
 public:
  virtual ~SpillerInterface() = default;
  // Writes all items to one new file. Errors (e.g. disk full) name the path.
  virtual void SpillAsync(std::vector<SpillItem> items,
                          absl::AnyInvocable<void(absl::StatusOr<std::vector<SpillLocation>>)> done) = 0;
  // Reads `location` into `dest` (which stays valid until the callback).
  virtual void RestoreAsync(const SpillLocation& location, uint8_t* dest,
                            absl::AnyInvocable<void(absl::Status)> done) = 0;
  // The object at `location` is gone; its file is removed once nothing else uses it.
  virtual void Delete(const SpillLocation& location) = 0;
};

class FileSpiller : public SpillerInterface {
 public:
  // Creates `dir` if needed. `threads` >= 1.
  FileSpiller(EventLoop& loop, std::string dir, int threads);
  ~FileSpiller() override;

  void SpillAsync(std::vector<SpillItem> items,
                  absl::AnyInvocable<void(absl::StatusOr<std::vector<SpillLocation>>)> done) override;
  void RestoreAsync(const SpillLocation& location, uint8_t* dest, absl::AnyInvocable<void(absl::Status)> done) override;
  void Delete(const SpillLocation& location) override;

  const std::string& dir() const { return dir_; }
  // Files currently on disk (loop thread).
  size_t num_files() const { return live_objects_per_file_.size(); }

 private:
  void RunOnPool(absl::AnyInvocable<void()> work);
  void WorkerMain();

  EventLoop& loop_;
  std::string dir_;
  int64_t next_file_ = 0;
  std::map<std::string, int64_t> live_objects_per_file_;  // loop thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void()>> work_;  // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace manta::object_store
