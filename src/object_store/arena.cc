#include "src/object_store/arena.h"

#include <glog/logging.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <linux/falloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace manta::object_store {
namespace {

constexpr int64_t kPage = 4096;
constexpr int64_t kPrefaultChunk = 32 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<Arena>> Arena::Create(int64_t capacity_bytes) {
  if (capacity_bytes <= 0) return absl::InvalidArgumentError("object store capacity must be positive");
  int64_t capacity = (capacity_bytes + kPage - 1) / kPage * kPage;
  int fd = memfd_create("manta_object_store", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(std::string("memfd_create: ") + std::strerror(errno));
  if (ftruncate(fd, capacity) != 0) {
    int err = errno;
    close(fd);
    return absl::ResourceExhaustedError("cannot size the object store to " + std::to_string(capacity) +
                                        " bytes: " + std::strerror(err));
  }
  void* base = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    close(fd);
    return absl::ResourceExhaustedError("cannot map " + std::to_string(capacity) +
                                        " bytes of object store: " + std::strerror(err));
  }
  std::unique_ptr<Arena> arena(new Arena(fd, static_cast<uint8_t*>(base), capacity));
  Arena* a = arena.get();
  arena->prefault_thread_ = std::thread([a] { a->PrefaultMain(); });
  return arena;
}

absl::StatusOr<std::unique_ptr<Arena>> Arena::Map(int fd, int64_t capacity_bytes) {
  // The size comes from the store's reply: map no more than the memory has, since
  // touching a page past its end kills the process (SIGBUS).
  struct stat st {};
  if (capacity_bytes <= 0 || fstat(fd, &st) != 0 || capacity_bytes > st.st_size) {
    close(fd);
    return absl::InternalError("the object store's memory is " + std::to_string(st.st_size) + " bytes, not the " +
                               std::to_string(capacity_bytes) + " it announced");
  }
  void* base = mmap(nullptr, capacity_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    close(fd);
    return absl::InternalError("cannot map the object store: " + std::string(std::strerror(err)));
  }
  return std::unique_ptr<Arena>(new Arena(fd, static_cast<uint8_t*>(base), capacity_bytes));
}

void Arena::PrefaultMain() {
  // Pre-faulting only moves work earlier: it must never compete with real work for
  // the CPU, so it runs at idle priority.
  sched_param param{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
  for (;;) {
    int64_t from = 0;
    int64_t to = 0;
    uint64_t generation = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || target_ > prefaulted_.load(std::memory_order_relaxed); });
      if (stop_) return;
      from = prefaulted_.load(std::memory_order_relaxed);
      to = std::min(target_, from + kPrefaultChunk);
      generation = generation_;
    }
    // MADV_POPULATE_WRITE never changes contents, so it is safe next to clients'
    // writes. Kernels before 5.14 lack it: there the arena faults on first use.
    if (madvise(base_ + from, to - from, MADV_POPULATE_WRITE) != 0) {
      LOG_FIRST_N(WARNING, 1) << "cannot pre-fault the object store: " << std::strerror(errno);
    }
    {
      // Under the lock, so a waiter cannot miss the wake-up between its check and wait.
      std::lock_guard<std::mutex> lock(mu_);
      if (generation == generation_) prefaulted_.store(to, std::memory_order_release);
    }
    cv_.notify_all();
  }
}

void Arena::PrefaultUpTo(int64_t end_offset) {
  end_offset = std::min(capacity_, (end_offset + kPage - 1) / kPage * kPage);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (end_offset <= target_) return;
    target_ = end_offset;
  }
  cv_.notify_all();
}

int64_t Arena::prefault_target() const {
  std::lock_guard<std::mutex> lock(mu_);
  return target_;
}

void Arena::ReleaseFrom(int64_t offset) {
  offset = std::clamp<int64_t>((offset + kPage - 1) / kPage * kPage, 0, capacity_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    target_ = std::min(target_, offset);
    if (prefaulted_.load(std::memory_order_relaxed) > offset) prefaulted_.store(offset, std::memory_order_release);
    ++generation_;
  }
  // Punching a hole in the memfd frees its pages in every process that maps it; a
  // chunk the populating thread is working on meanwhile may stay resident (not
  // counted as populated) until the next release.
  if (offset < capacity_ && fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, capacity_ - offset) != 0) {
    LOG_FIRST_N(WARNING, 1) << "cannot give object store memory back: " << std::strerror(errno);
  }
  cv_.notify_all();
}

void Arena::WaitForPrefault() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stop_ || prefaulted_.load() >= target_; });
}

void Arena::PopulateRange(int64_t offset, int64_t size, bool write) const {
  int64_t start = offset / kPage * kPage;
  int64_t end = std::min(capacity_, (offset + size + kPage - 1) / kPage * kPage);
  if (end <= start) return;
  madvise(base_ + start, end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}

Arena::~Arena() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (prefault_thread_.joinable()) prefault_thread_.join();
  munmap(base_, capacity_);
  close(fd_);
}

}  // namespace manta::object_store
