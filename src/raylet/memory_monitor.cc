#include "src/raylet/memory_monitor.h"

#include <glog/logging.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <cstdio>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "src/common/util.h"

namespace manta::raylet {
namespace {

std::string Gb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

// A file holding one number ("max" = no limit: nullopt).
absl::StatusOr<std::optional<int64_t>> ReadNumber(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::string_view value = absl::StripAsciiWhitespace(*text);
  if (value == "max") return std::optional<int64_t>();
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) return absl::DataLossError(path + " does not hold a number: " + std::string(value));
  return std::optional<int64_t>(n);
}

// The value of `key` in a "key value" file (memory.stat), 0 when absent.
int64_t StatValue(const std::string& path, absl::string_view key) {
  auto text = ReadFile(path);
  if (!text.ok()) return 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t n = 0;
    if (parts.size() == 2 && parts[0] == key && absl::SimpleAtoi(parts[1], &n)) return n;
  }
  return 0;
}

// /proc/meminfo's value of `key` in bytes (it counts in kB).
std::optional<int64_t> MeminfoBytes(const std::string& text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, ":")) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kb = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &kb)) return kb * 1024;
  }
  return std::nullopt;
}

// This process's memory cgroup directory and whether it is v2 (unified), from
// /proc/self/cgroup; a path not mounted where it says (a cgroup namespace) is the
// mount's root.
std::optional<std::pair<std::string, bool>> MemoryCgroupDir(const std::string& root) {
  auto text = ReadFile(root + "/proc/self/cgroup");
  if (!text.ok()) return std::nullopt;
  auto exists = [](const std::string& path) { return access(path.c_str(), F_OK) == 0; };
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    std::vector<absl::string_view> controllers = absl::StrSplit(parts[1], ',');
    bool memory_v1 = std::find(controllers.begin(), controllers.end(), "memory") != controllers.end();
    std::string base = root + (memory_v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup");
    std::string limit_file = memory_v1 ? "/memory.limit_in_bytes" : "/memory.max";
    if (!memory_v1) {
      // The unified hierarchy, when it has the memory controller.
      auto available = ReadFile(base + "/cgroup.controllers");
      if (parts[0] != "0" || !available.ok() || available->find("memory") == std::string::npos) continue;
    }
    std::string dir = base + std::string(parts[2]);
    if (!exists(dir + limit_file)) dir = base;
    if (!exists(dir + limit_file)) continue;
    return std::make_pair(dir, !memory_v1);
  }
  return std::nullopt;
}

}  // namespace

std::string MemoryUsage::ToString() const {
  char fraction_text[16];
  std::snprintf(fraction_text, sizeof(fraction_text), "%.2f", fraction());
  return Gb(used_bytes) + " of " + Gb(limit_bytes) + " (" + fraction_text + ") in " + scope;
}

absl::StatusOr<MemoryUsage> ReadMemoryUsage(const std::string& root) {
  auto meminfo = ReadFile(root + "/proc/meminfo");
  if (!meminfo.ok()) return meminfo.status();
  std::optional<int64_t> total = MeminfoBytes(*meminfo, "MemTotal");
  std::optional<int64_t> available = MeminfoBytes(*meminfo, "MemAvailable");
  if (!total || !available) return absl::DataLossError(root + "/proc/meminfo lacks MemTotal or MemAvailable");
  if (auto cgroup = MemoryCgroupDir(root)) {
    const auto& [dir, v2] = *cgroup;
    auto limit = ReadNumber(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    auto usage = ReadNumber(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    if (limit.ok() && usage.ok() && limit->has_value() && usage->has_value() && **limit < *total) {
      int64_t inactive = StatValue(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
      MemoryUsage u;
      u.used_bytes = std::max<int64_t>(0, **usage - inactive);
      u.limit_bytes = **limit;
      u.scope = "memory cgroup " + dir.substr(root.size());
      return u;
    }
  }
  MemoryUsage u;
  u.used_bytes = *total - *available;
  u.limit_bytes = *total;
  u.scope = "node";
  return u;
}

MemoryMonitor::MemoryMonitor(EventLoop& loop, double threshold, int64_t refresh_ms, KillOne kill_one, Reader reader)
    : loop_(loop), threshold_(threshold), kill_one_(std::move(kill_one)), reader_(std::move(reader)) {
  if (!reader_) reader_ = [] { return ReadMemoryUsage(); };
  if (refresh_ms > 0) timer_ = loop_.RunEvery("MemoryMonitor.Check", refresh_ms, [this] { Check(); });
}

MemoryMonitor::~MemoryMonitor() = default;

void MemoryMonitor::Check() {
  // The last one killed frees its memory when it is gone (reaped).
  if (killed_pid_ > 0) {
    if (kill(killed_pid_, 0) == 0 || errno == EPERM) return;
    killed_pid_ = 0;
  }
  absl::StatusOr<MemoryUsage> usage = reader_();
  if (!usage.ok()) {
    if (!warned_unreadable_) LOG(WARNING) << "memory monitor: cannot read memory use: " << usage.status();
    warned_unreadable_ = true;
    return;
  }
  last_fraction_ = usage->fraction();
  if (usage->fraction() <= threshold_) {
    warned_nothing_to_kill_ = false;
    return;
  }
  pid_t pid = kill_one_(*usage, threshold_);
  if (pid > 0) {
    killed_pid_ = pid;
    return;
  }
  if (!warned_nothing_to_kill_) {
    LOG(WARNING) << "memory monitor: memory use " << usage->ToString() << " is past the threshold " << threshold_
                 << ", but no worker runs a task here to be killed";
  }
  warned_nothing_to_kill_ = true;
}

}  // namespace manta::raylet
