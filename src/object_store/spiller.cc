#include "src/object_store/spiller.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace manta::object_store {
namespace {

absl::Status WriteAll(int fd, const uint8_t* data, int64_t size, int64_t offset, const std::string& path) {
  int64_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, static_cast<size_t>(std::min<int64_t>(size - done, 1 << 30)), offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ResourceExhaustedError("spilling to " + path + " failed: " + std::strerror(errno));
    }
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace

FileSpiller::FileSpiller(EventLoop& loop, std::string dir, int threads) : loop_(loop), dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) LOG(ERROR) << "cannot create spill directory " << dir_ << ": " << ec.message();
  // Spilled objects are readable by this user alone: the files are 0600, and the
  // directory (when it is ours) 0700, whatever the umask and wherever it points.
  struct stat st {};
  if (!ec && stat(dir_.c_str(), &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0077) != 0 &&
      chmod(dir_.c_str(), 0700) != 0) {
    LOG(WARNING) << "cannot make the spill directory " << dir_ << " private: " << std::strerror(errno);
  }
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { WorkerMain(); });
}

FileSpiller::~FileSpiller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  // Spilled bytes belong to this raylet's lifetime only.
  for (const auto& [path, n] : live_objects_per_file_) unlink(path.c_str());
}

void FileSpiller::RunOnPool(absl::AnyInvocable<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void FileSpiller::WorkerMain() {
  for (;;) {
    absl::AnyInvocable<void()> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !work_.empty(); });
      if (work_.empty()) return;
      work = std::move(work_.front());
      work_.pop_front();
    }
    work();
  }
}

void FileSpiller::SpillAsync(std::vector<SpillItem> items,
                             absl::AnyInvocable<void(absl::StatusOr<std::vector<SpillLocation>>)> done) {
  std::string path = dir_ + "/spill_" + std::to_string(getpid()) + "_" + std::to_string(next_file_++);
  RunOnPool([this, path, items = std::move(items), done = std::move(done)]() mutable {
    absl::StatusOr<std::vector<SpillLocation>> result;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      result = absl::ResourceExhaustedError("cannot create spill file " + path + ": " + std::strerror(errno));
    } else {
      std::vector<SpillLocation> locations;
      int64_t offset = 0;
      absl::Status s;
      for (const auto& item : items) {
        s = WriteAll(fd, item.data, item.size, offset, path);
        if (!s.ok()) break;
        locations.push_back({path, offset, item.size});
        offset += item.size;
      }
      // Not synced: spilled bytes need only outlive this raylet's memory, not the
      // machine (after a crash the store's memory is gone too), and a sync per file
      // held spilling, and the creates waiting for it, to the disk's write speed
      // while the page cache takes the bytes at memory speed. A full disk fails the
      // write itself; a late write-back error fails close.
      if (close(fd) != 0 && s.ok()) {
        s = absl::ResourceExhaustedError("spilling to " + path + " failed: " + std::strerror(errno));
      }
      if (!s.ok()) {
        unlink(path.c_str());
        result = s;
      } else {
        result = std::move(locations);
      }
    }
    loop_.Post("FileSpiller.SpillDone", [this, path, result = std::move(result), done = std::move(done)]() mutable {
      if (result.ok()) live_objects_per_file_[path] = static_cast<int64_t>(result->size());
      done(std::move(result));
    });
  });
}

void FileSpiller::RestoreAsync(const SpillLocation& location, uint8_t* dest,
                               absl::AnyInvocable<void(absl::Status)> done) {
  RunOnPool([this, location, dest, done = std::move(done)]() mutable {
    absl::Status s;
    int fd = open(location.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      s = absl::DataLossError("cannot open spill file " + location.path + ": " + std::strerror(errno));
    } else {
      int64_t got = 0;
      while (got < location.size) {
        ssize_t n = pread(fd, dest + got, static_cast<size_t>(location.size - got), location.offset + got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          s = absl::DataLossError("spill file " + location.path + " is truncated or unreadable");
          break;
        }
        got += n;
      }
      close(fd);
    }
    loop_.Post("FileSpiller.RestoreDone", [s, done = std::move(done)]() mutable { done(s); });
  });
}

void FileSpiller::Delete(const SpillLocation& location) {
  auto it = live_objects_per_file_.find(location.path);
  if (it == live_objects_per_file_.end()) return;
  if (--it->second <= 0) {
    std::string path = it->first;
    live_objects_per_file_.erase(it);
    RunOnPool([path] { unlink(path.c_str()); });
  }
}

}  // namespace manta::object_store
