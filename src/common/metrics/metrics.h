// Metrics: a registry of gauges, counters, sums and histograms, used for a daemon's
// own metrics and for the metrics users record through Ray's API (ray::Gauge,
// ray::Counter, ray::Sum, ray::Histogram); and an Aggregator that combines the
// snapshots of many processes (a raylet gathers its workers' user metrics).
//
// Threading: Registry, Metric and Aggregator are thread-safe. Metric::Record is meant
// for users' hot loops: it takes only the metric's own mutex and allocates nothing
// when the series exists and the metric has at most kMetricInlineTags tag keys.
//
// Ownership: a Registry owns its Metrics; a Metric* it returns stays valid for the
// Registry's life. Snapshots (MetricFamily) are plain values.
//
// Bounds: each metric holds at most `max_series_per_metric` series (distinct tag
// value sets); records that would create more are dropped and counted, so that a
// user who tags by request id cannot exhaust a daemon's memory. The Aggregator
// bounds its sources and, per metric, its combined series the same way.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace manta::metrics {

enum class Kind { kGauge, kCounter, kSum, kHistogram };

// "gauge", "counter", "sum", "histogram".
const char* KindName(Kind kind);

struct MetricDef {
  std::string name, description, unit;
  Kind kind = Kind::kGauge;
  std::vector<std::string> tag_keys;
  std::vector<double> boundaries;  // histogram only; finite, strictly increasing
};

// One series' value. For histograms: bucket_counts[i] counts observations
// <= boundaries[i] and > boundaries[i-1] (NOT cumulative); it has
// boundaries.size() + 1 entries, the last for (boundaries.back(), +Inf).
struct SeriesValue {
  std::vector<std::string> tag_values;  // in tag_keys order; "" for a key not given
  double value = 0;                     // gauge / counter / sum
  std::vector<uint64_t> bucket_counts;  // histogram
  double sum = 0;                       // histogram
  uint64_t count = 0;                   // histogram
  int64_t update_unix_ns = 0;           // when last changed (gauges: newest wins when merged)
};

struct MetricFamily {
  MetricDef def;
  std::vector<SeriesValue> series;  // sorted by tag_values
  uint64_t dropped_series = 0;      // records dropped for want of room for a new series
};

// OK, or InvalidArgument saying what is wrong with `def`: an empty name; a name not
// of [a-zA-Z_:.\-/][a-zA-Z0-9_:.\-/]* ('.', '-' and '/' are accepted, since Ray users
// name metrics "app.requests", and become '_' through SanitizeName); a tag key not of
// [a-zA-Z_][a-zA-Z0-9_]* or starting with "__" (reserved by Prometheus); a duplicate
// tag key; "le" as a histogram's tag key; boundaries on a metric that is not a
// histogram; boundaries not finite or not strictly increasing.
absl::Status ValidateDef(const MetricDef& def);

// `name` with every character outside [a-zA-Z0-9_:] replaced by '_', and '_'
// prepended when it starts with a digit (or is empty).
std::string SanitizeName(std::string_view name);

// Tag keys up to this many are looked up without allocating in Metric::Record.
inline constexpr size_t kMetricInlineTags = 16;

class Registry;

// A registered metric: a handle owned by its Registry. Thread-safe.
class Metric {
 public:
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  // The definition as registered, with the name sanitized.
  const MetricDef& def() const { return def_; }

  // Records `value` in the series `tags` name; dispatches by kind. A gauge is set to
  // it; a counter increases by it (a negative or non-finite value is rejected: a
  // counter never goes down); a sum adds it (negative too; non-finite rejected); a
  // histogram observes it (non-finite rejected). A gauge takes any value, NaN and
  // infinities included. A key not among tag_keys is ignored; a tag key not given
  // records "". Returns whether the value was recorded: false when rejected (counted
  // in rejected()) or when the series is new and the metric is at its series cap
  // (counted in the snapshot's dropped_series).
  bool Record(double value, const std::unordered_map<std::string, std::string>& tags);
  // The same with tag values in tag_keys order (missing trailing values are "",
  // extra ones ignored): the fast path.
  bool Record(double value, const std::vector<std::string>& tag_values);
  // The same for a braced list, `Record(1, {{"route", "/a"}})`, which would be
  // ambiguous between the two above (the first pair given for a key counts).
  bool Record(double value, std::initializer_list<std::pair<std::string_view, std::string_view>> tags);

  // Values rejected so far (see Record).
  uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;

  // A series' key without owning its strings: what Record looks up with.
  struct TagView {
    const std::string_view* values;
    size_t size;
  };
  struct TagHash {
    using is_transparent = void;
    size_t operator()(const std::vector<std::string>& key) const;
    size_t operator()(const TagView& key) const;
  };
  struct TagEq {
    using is_transparent = void;
    bool operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const { return a == b; }
    bool operator()(const std::vector<std::string>& a, const TagView& b) const;
    bool operator()(const TagView& a, const std::vector<std::string>& b) const { return (*this)(b, a); }
  };
  struct Series {
    double value = 0;
    std::vector<uint64_t> bucket_counts;
    double sum = 0;
    uint64_t count = 0;
    int64_t update_unix_ns = 0;
  };

  Metric(MetricDef def, size_t max_series) : def_(std::move(def)), max_series_(max_series) {}
  // Applies `value` to the series `tags` (tag_keys.size() values).
  bool RecordTags(double value, TagView tags);
  // A snapshot of every series, sorted by tags.
  MetricFamily Snapshot() const;
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  const MetricDef def_;
  const size_t max_series_;
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> dropped_{0};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::vector<std::string>, Series, TagHash, TagEq> series_ ABSL_GUARDED_BY(mu_);
};

// The metrics of one process. Thread-safe.
class Registry {
 public:
  // `value` pairs a callback metric's series (tag values in tag_keys order) with its value.
  using CallbackSeries = std::vector<std::pair<std::vector<std::string>, double>>;
  using FillCallback = std::function<void(CallbackSeries*)>;

  explicit Registry(size_t max_series_per_metric = 1000);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers `def` (its name sanitized). Returns the existing metric when one with
  // the same sanitized name, kind, tag keys and boundaries exists (its description
  // and unit are kept). Errors: InvalidArgument from ValidateDef; AlreadyExists,
  // naming both definitions, when the name is taken with another kind, tag keys or
  // boundaries, or by a callback metric.
  absl::StatusOr<Metric*> Register(MetricDef def);

  // A metric whose series are computed at collection time (daemon state such as
  // tasks by state): every Collect() calls `fill`, on the thread calling Collect, and
  // its output replaces the metric's series completely (a series not produced is
  // gone; a repeated tag set keeps the last value; series beyond the cap are
  // dropped and counted). Gauge or counter kinds only. Errors: InvalidArgument (bad
  // def or kind), AlreadyExists when the name is taken.
  // REQUIRES: `fill` does not call Collect() on this registry.
  absl::Status RegisterCallback(MetricDef def, FillCallback fill);

  // A snapshot of every metric: families sorted by name, series by tag values.
  // Callbacks run one at a time, never concurrently (Collect calls are serialized).
  std::vector<MetricFamily> Collect();

  // Records dropped for want of room for a new series, over all metrics and collects.
  uint64_t dropped_series_total() const;

 private:
  struct CallbackMetric {
    MetricDef def;
    FillCallback fill;
    std::atomic<uint64_t> dropped{0};
  };
  // Runs `callback` and makes a family of what it produced.
  MetricFamily CollectCallback(CallbackMetric* callback);

  const size_t max_series_per_metric_;
  absl::Mutex collect_mu_;  // serializes Collect, hence the callbacks
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Metric>> metrics_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<CallbackMetric>> callbacks_ ABSL_GUARDED_BY(mu_);
};

// Combines the snapshots of many processes. It keeps the last snapshot of each
// source (snapshots are cumulative: a source's counter is its total so far).
// Combined: counters, sums and histograms add up across sources (a series' time is
// the newest of its parts); for gauges the series with the newest update_unix_ns
// wins (on a tie, the source whose id sorts last). The first definition seen for a
// name is the name's; a family whose kind, tag keys or boundaries differ from it, or
// that is malformed (tag values or bucket counts of the wrong size), is rejected and
// counted in rejected_families().
//
// A source that goes away (Forget) keeps its last values, gauges included, so
// counters stay monotonic; if it comes back (Update after Forget) its new snapshot
// replaces them. Bounded: at most `max_sources` sources are kept one by one; beyond
// that the oldest forgotten source is folded into a retained "past" total (so totals
// stay right, but that source coming back would be counted twice); when every kept
// source is live, an Update from a new source is rejected (its families counted in
// rejected_families()). Each family, of a snapshot and combined, keeps at most
// `max_series_per_metric` series; more are dropped and counted in dropped_series.
//
// Thread-safe.
class Aggregator {
 public:
  explicit Aggregator(size_t max_sources = 4096, size_t max_series_per_metric = 1000);
  ~Aggregator();

  // Replaces the snapshot of `source` with `families`.
  void Update(const std::string& source, std::vector<MetricFamily> families);
  // `source` is gone: its last values stay in the totals. No-op for an unknown source.
  void Forget(const std::string& source);
  // Every metric combined, sorted by name, series by tag values.
  std::vector<MetricFamily> Combined() const;
  // Families rejected by Update: conflicting or malformed, or from a source over the cap.
  uint64_t rejected_families() const;

 private:
  struct Source {
    std::vector<MetricFamily> families;
    bool forgotten = false;
    uint64_t forgotten_seq = 0;  // order of Forget calls
  };
  // Drops the families that conflict with known definitions or are malformed, caps
  // their series, and records the definitions of new names.
  void Admit(std::vector<MetricFamily>* families) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Folds the oldest forgotten source into past_ while there are too many sources.
  // Returns false when every kept source is live and still one too many.
  bool MakeRoom(size_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_sources_;
  const size_t max_series_;
  mutable absl::Mutex mu_;
  std::map<std::string, Source> sources_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, MetricDef> defs_ ABSL_GUARDED_BY(mu_);  // first definition per name
  std::vector<MetricFamily> past_ ABSL_GUARDED_BY(mu_);  // folded sources, combined
  uint64_t forget_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::metrics
