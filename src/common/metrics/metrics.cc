#include "src/common/metrics/metrics.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <set>

#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace manta::metrics {

namespace {

int64_t MetricNowUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool MetricNameChar(char c, bool first) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (absl::ascii_isalpha(u) || c == '_' || c == ':' || c == '.' || c == '-' || c == '/') return true;
  return !first && absl::ascii_isdigit(u);
}

bool MetricTagKeyValid(const std::string& key) {
  if (key.empty() || absl::ascii_isdigit(static_cast<unsigned char>(key[0]))) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// `counter "name" with tag keys [a, b]` (and `and boundaries [...]` for histograms).
std::string MetricDescribe(const MetricDef& def) {
  std::string text = absl::StrCat(KindName(def.kind), " \"", def.name, "\" with tag keys [",
                                  absl::StrJoin(def.tag_keys, ", "), "]");
  if (def.kind == Kind::kHistogram) absl::StrAppend(&text, " and boundaries [", absl::StrJoin(def.boundaries, ", "), "]");
  return text;
}

// Whether two definitions describe the same series (description and unit aside).
bool MetricSameShape(const MetricDef& a, const MetricDef& b) {
  return a.kind == b.kind && a.tag_keys == b.tag_keys && a.boundaries == b.boundaries;
}

absl::Status MetricValidateBoundaries(const MetricDef& def) {
  if (def.kind != Kind::kHistogram) {
    if (def.boundaries.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(KindName(def.kind), " \"", def.name, "\": only histograms take boundaries"));
  }
  for (size_t i = 0; i < def.boundaries.size(); ++i) {
    if (!std::isfinite(def.boundaries[i])) {
      return absl::InvalidArgumentError(absl::StrCat("histogram \"", def.name, "\": boundary ", i, " is not finite"));
    }
    if (i > 0 && !(def.boundaries[i] > def.boundaries[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("histogram \"", def.name, "\": boundaries must be strictly increasing (",
                                                     def.boundaries[i], " after ", def.boundaries[i - 1], ")"));
    }
  }
  return absl::OkStatus();
}

// Calls `use(values)` with the tag values `get(i)` (i < n) as string_views, on the
// stack when there are few.
template <typename Get, typename Use>
bool MetricWithTagViews(size_t n, const Get& get, const Use& use) {
  std::array<std::string_view, kMetricInlineTags> inline_values;
  std::vector<std::string_view> heap_values;
  std::string_view* values = inline_values.data();
  if (n > kMetricInlineTags) {
    heap_values.resize(n);
    values = heap_values.data();
  }
  for (size_t i = 0; i < n; ++i) values[i] = get(i);
  return use(values);
}

size_t MetricHashCombine(size_t seed, std::string_view value) {
  const size_t h = absl::Hash<std::string_view>{}(value);
  return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

bool MetricSeriesLess(const SeriesValue& a, const SeriesValue& b) { return a.tag_values < b.tag_values; }

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kGauge:
      return "gauge";
    case Kind::kCounter:
      return "counter";
    case Kind::kSum:
      return "sum";
    case Kind::kHistogram:
      return "histogram";
  }
  return "unknown";
}

std::string SanitizeName(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 1);
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) out.push_back('_');
  for (char c : name) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
    out.push_back(ok ? c : '_');
  }
  return out;
}

absl::Status ValidateDef(const MetricDef& def) {
  if (def.name.empty()) return absl::InvalidArgumentError("metric name is empty");
  for (size_t i = 0; i < def.name.size(); ++i) {
    if (!MetricNameChar(def.name[i], i == 0)) {
      return absl::InvalidArgumentError(absl::StrCat("metric name \"", def.name,
                                                     "\" is invalid: it must match [a-zA-Z_:][a-zA-Z0-9_:]* "
                                                     "('.', '-' and '/' are also accepted and become '_')"));
    }
  }
  if (def.kind != Kind::kGauge && def.kind != Kind::kCounter && def.kind != Kind::kSum && def.kind != Kind::kHistogram) {
    return absl::InvalidArgumentError(absl::StrCat("metric \"", def.name, "\": unknown kind ", static_cast<int>(def.kind)));
  }
  for (size_t i = 0; i < def.tag_keys.size(); ++i) {
    const std::string& key = def.tag_keys[i];
    const std::string prefix = absl::StrCat(KindName(def.kind), " \"", def.name, "\": tag key \"", key, "\"");
    if (!MetricTagKeyValid(key)) return absl::InvalidArgumentError(prefix + " is invalid: it must match [a-zA-Z_][a-zA-Z0-9_]*");
    if (key.rfind("__", 0) == 0) return absl::InvalidArgumentError(prefix + " is reserved (it starts with \"__\")");
    if (key == "le" && def.kind == Kind::kHistogram) return absl::InvalidArgumentError(prefix + " is reserved for bucket bounds");
    if (std::find(def.tag_keys.begin(), def.tag_keys.begin() + i, key) != def.tag_keys.begin() + i) {
      return absl::InvalidArgumentError(prefix + " appears twice");
    }
  }
  return MetricValidateBoundaries(def);
}

// ---- Metric -----------------------------------------------------------------------

size_t Metric::TagHash::operator()(const std::vector<std::string>& key) const {
  size_t h = key.size();
  for (const auto& value : key) h = MetricHashCombine(h, value);
  return h;
}

size_t Metric::TagHash::operator()(const TagView& key) const {
  size_t h = key.size;
  for (size_t i = 0; i < key.size; ++i) h = MetricHashCombine(h, key.values[i]);
  return h;
}

bool Metric::TagEq::operator()(const std::vector<std::string>& a, const TagView& b) const {
  if (a.size() != b.size) return false;
  for (size_t i = 0; i < b.size; ++i) {
    if (a[i] != b.values[i]) return false;
  }
  return true;
}

bool Metric::Record(double value, const std::unordered_map<std::string, std::string>& tags) {
  const auto& keys = def_.tag_keys;
  return MetricWithTagViews(
      keys.size(),
      [&](size_t i) -> std::string_view {
        auto it = tags.find(keys[i]);
        return it == tags.end() ? std::string_view() : std::string_view(it->second);
      },
      [&](const std::string_view* values) { return RecordTags(value, TagView{values, keys.size()}); });
}

bool Metric::Record(double value, const std::vector<std::string>& tag_values) {
  const size_t n = def_.tag_keys.size();
  return MetricWithTagViews(
      n, [&](size_t i) { return i < tag_values.size() ? std::string_view(tag_values[i]) : std::string_view(); },
      [&](const std::string_view* values) { return RecordTags(value, TagView{values, n}); });
}

bool Metric::Record(double value, std::initializer_list<std::pair<std::string_view, std::string_view>> tags) {
  const auto& keys = def_.tag_keys;
  return MetricWithTagViews(
      keys.size(),
      [&](size_t i) -> std::string_view {
        for (const auto& [key, tag_value] : tags) {
          if (key == keys[i]) return tag_value;
        }
        return std::string_view();
      },
      [&](const std::string_view* values) { return RecordTags(value, TagView{values, keys.size()}); });
}

bool Metric::RecordTags(double value, TagView tags) {
  const bool valid = def_.kind == Kind::kGauge || (std::isfinite(value) && (def_.kind != Kind::kCounter || value >= 0));
  if (!valid) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const int64_t now = MetricNowUnixNs();
  absl::MutexLock lock(&mu_);
  auto it = series_.find(tags);
  if (it == series_.end()) {
    if (series_.size() >= max_series_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    std::vector<std::string> key(tags.values, tags.values + tags.size);
    it = series_.emplace(std::move(key), Series{}).first;
    if (def_.kind == Kind::kHistogram) it->second.bucket_counts.assign(def_.boundaries.size() + 1, 0);
  }
  Series& series = it->second;
  switch (def_.kind) {
    case Kind::kGauge:
      series.value = value;
      break;
    case Kind::kCounter:
    case Kind::kSum:
      series.value += value;
      break;
    case Kind::kHistogram: {
      const auto& bounds = def_.boundaries;
      // The first bucket whose upper bound is >= value.
      series.bucket_counts[std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin()]++;
      series.sum += value;
      series.count++;
      break;
    }
  }
  series.update_unix_ns = now;
  return true;
}

MetricFamily Metric::Snapshot() const {
  MetricFamily family;
  family.def = def_;
  family.dropped_series = dropped();
  {
    absl::ReaderMutexLock lock(&mu_);
    family.series.reserve(series_.size());
    for (const auto& [tags, series] : series_) {
      SeriesValue& out = family.series.emplace_back();
      out.tag_values = tags;
      out.value = series.value;
      out.bucket_counts = series.bucket_counts;
      out.sum = series.sum;
      out.count = series.count;
      out.update_unix_ns = series.update_unix_ns;
    }
  }
  std::sort(family.series.begin(), family.series.end(), MetricSeriesLess);
  return family;
}

// ---- Registry ---------------------------------------------------------------------

Registry::Registry(size_t max_series_per_metric) : max_series_per_metric_(max_series_per_metric) {}

Registry::~Registry() = default;

absl::StatusOr<Metric*> Registry::Register(MetricDef def) {
  if (absl::Status status = ValidateDef(def); !status.ok()) return status;
  const std::string given = MetricDescribe(def);
  def.name = SanitizeName(def.name);
  absl::MutexLock lock(&mu_);
  if (auto callback = callbacks_.find(def.name); callback != callbacks_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("cannot register ", given, ": the name is taken by the callback ", MetricDescribe(callback->second->def)));
  }
  auto it = metrics_.find(def.name);
  if (it != metrics_.end()) {
    if (MetricSameShape(it->second->def(), def)) return it->second.get();
    return absl::AlreadyExistsError(
        absl::StrCat("cannot register ", given, ": the name is taken by ", MetricDescribe(it->second->def())));
  }
  const std::string name = def.name;
  auto metric = std::unique_ptr<Metric>(new Metric(std::move(def), max_series_per_metric_));
  return metrics_.emplace(name, std::move(metric)).first->second.get();
}

absl::Status Registry::RegisterCallback(MetricDef def, FillCallback fill) {
  if (absl::Status status = ValidateDef(def); !status.ok()) return status;
  const std::string given = MetricDescribe(def);
  if (def.kind != Kind::kGauge && def.kind != Kind::kCounter) {
    return absl::InvalidArgumentError(absl::StrCat("cannot register the callback ", given, ": only gauges and counters can be callbacks"));
  }
  def.name = SanitizeName(def.name);
  absl::MutexLock lock(&mu_);
  const MetricDef* taken = nullptr;
  if (auto it = metrics_.find(def.name); it != metrics_.end()) taken = &it->second->def();
  if (auto it = callbacks_.find(def.name); it != callbacks_.end()) taken = &it->second->def;
  if (taken != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("cannot register the callback ", given, ": the name is taken by ", MetricDescribe(*taken)));
  }
  auto callback = std::make_unique<CallbackMetric>();
  callback->def = std::move(def);
  callback->fill = std::move(fill);
  const std::string name = callback->def.name;
  callbacks_.emplace(name, std::move(callback));
  return absl::OkStatus();
}

MetricFamily Registry::CollectCallback(CallbackMetric* callback) {
  CallbackSeries produced;
  callback->fill(&produced);
  const size_t n = callback->def.tag_keys.size();
  std::map<std::vector<std::string>, double> by_tags;
  uint64_t dropped = 0;
  for (auto& [tags, value] : produced) {
    tags.resize(n);
    auto it = by_tags.find(tags);
    if (it != by_tags.end()) {
      it->second = value;
    } else if (by_tags.size() >= max_series_per_metric_) {
      ++dropped;
    } else {
      by_tags.emplace(std::move(tags), value);
    }
  }
  callback->dropped.fetch_add(dropped, std::memory_order_relaxed);
  MetricFamily family;
  family.def = callback->def;
  family.dropped_series = dropped;
  const int64_t now = MetricNowUnixNs();
  for (auto& [tags, value] : by_tags) {
    SeriesValue& series = family.series.emplace_back();
    series.tag_values = tags;
    series.value = value;
    series.update_unix_ns = now;
  }
  return family;
}

std::vector<MetricFamily> Registry::Collect() {
  absl::MutexLock collect_lock(&collect_mu_);
  std::vector<Metric*> metrics;
  std::vector<CallbackMetric*> callbacks;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, metric] : metrics_) metrics.push_back(metric.get());
    for (const auto& [name, callback] : callbacks_) callbacks.push_back(callback.get());
  }
  std::vector<MetricFamily> families;
  families.reserve(metrics.size() + callbacks.size());
  for (Metric* metric : metrics) families.push_back(metric->Snapshot());
  // Outside mu_: a callback may record into (or register) other metrics.
  for (CallbackMetric* callback : callbacks) families.push_back(CollectCallback(callback));
  std::sort(families.begin(), families.end(),
            [](const MetricFamily& a, const MetricFamily& b) { return a.def.name < b.def.name; });
  return families;
}

uint64_t Registry::dropped_series_total() const {
  absl::ReaderMutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [name, metric] : metrics_) total += metric->dropped();
  for (const auto& [name, callback] : callbacks_) total += callback->dropped.load(std::memory_order_relaxed);
  return total;
}

// ---- Aggregator -------------------------------------------------------------------

namespace {

// Adds families up by name (see Aggregator). The families given must agree with
// each other's definitions (Aggregator::Admit made sure).
class MetricCombiner {
 public:
  explicit MetricCombiner(size_t max_series) : max_series_(max_series) {}

  void Add(const MetricFamily& family) {
    Entry& entry = entries_[family.def.name];
    if (!entry.defined) {
      entry.def = family.def;
      entry.defined = true;
    }
    entry.dropped += family.dropped_series;
    for (const SeriesValue& series : family.series) {
      auto it = entry.series.find(series.tag_values);
      if (it == entry.series.end()) {
        if (entry.series.size() >= max_series_) {
          ++entry.dropped;
        } else {
          entry.series.emplace(series.tag_values, series);
        }
        continue;
      }
      Merge(entry.def.kind, series, &it->second);
    }
  }

  std::vector<MetricFamily> Take() {
    std::vector<MetricFamily> families;
    families.reserve(entries_.size());
    for (auto& [name, entry] : entries_) {
      MetricFamily& family = families.emplace_back();
      family.def = std::move(entry.def);
      family.dropped_series = entry.dropped;
      family.series.reserve(entry.series.size());
      for (auto& [tags, series] : entry.series) family.series.push_back(std::move(series));
    }
    entries_.clear();
    return families;
  }

 private:
  struct Entry {
    MetricDef def;
    bool defined = false;
    uint64_t dropped = 0;
    std::map<std::vector<std::string>, SeriesValue> series;
  };

  static void Merge(Kind kind, const SeriesValue& from, SeriesValue* into) {
    if (kind == Kind::kGauge) {
      // Later parts win ties: sources are added in id order.
      if (from.update_unix_ns >= into->update_unix_ns) *into = from;
      return;
    }
    into->update_unix_ns = std::max(into->update_unix_ns, from.update_unix_ns);
    if (kind != Kind::kHistogram) {
      into->value += from.value;
      return;
    }
    for (size_t i = 0; i < into->bucket_counts.size() && i < from.bucket_counts.size(); ++i) {
      into->bucket_counts[i] += from.bucket_counts[i];
    }
    into->sum += from.sum;
    into->count += from.count;
  }

  const size_t max_series_;
  std::map<std::string, Entry> entries_;
};

// Why `family` cannot be combined as it is, or "" when it can.
std::string MetricMalformed(const MetricFamily& family) {
  if (absl::Status status = ValidateDef(family.def); !status.ok()) return std::string(status.message());
  for (const SeriesValue& series : family.series) {
    if (series.tag_values.size() != family.def.tag_keys.size()) return "a series has the wrong number of tag values";
    if (family.def.kind == Kind::kHistogram && series.bucket_counts.size() != family.def.boundaries.size() + 1) {
      return "a series has the wrong number of buckets";
    }
  }
  return "";
}

}  // namespace

Aggregator::Aggregator(size_t max_sources, size_t max_series_per_metric)
    : max_sources_(std::max<size_t>(max_sources, 1)), max_series_(max_series_per_metric) {}

Aggregator::~Aggregator() = default;

void Aggregator::Admit(std::vector<MetricFamily>* families) {
  std::vector<MetricFamily> admitted;
  admitted.reserve(families->size());
  std::set<std::string> names;
  for (MetricFamily& family : *families) {
    if (!MetricMalformed(family).empty()) {
      ++rejected_;
      continue;
    }
    family.def.name = SanitizeName(family.def.name);
    auto [known, inserted] = defs_.try_emplace(family.def.name, family.def);
    if ((!inserted && !MetricSameShape(known->second, family.def)) || !names.insert(family.def.name).second) {
      ++rejected_;
      continue;
    }
    std::sort(family.series.begin(), family.series.end(), MetricSeriesLess);
    if (family.series.size() > max_series_) {
      family.dropped_series += family.series.size() - max_series_;
      family.series.resize(max_series_);
    }
    admitted.push_back(std::move(family));
  }
  *families = std::move(admitted);
}

bool Aggregator::MakeRoom(size_t needed) {
  while (sources_.size() + needed > max_sources_) {
    auto oldest = sources_.end();
    for (auto it = sources_.begin(); it != sources_.end(); ++it) {
      if (it->second.forgotten && (oldest == sources_.end() || it->second.forgotten_seq < oldest->second.forgotten_seq)) {
        oldest = it;
      }
    }
    if (oldest == sources_.end()) return false;
    MetricCombiner combiner(max_series_);
    for (const MetricFamily& family : past_) combiner.Add(family);
    for (const MetricFamily& family : oldest->second.families) combiner.Add(family);
    past_ = combiner.Take();
    sources_.erase(oldest);
  }
  return true;
}

void Aggregator::Update(const std::string& source, std::vector<MetricFamily> families) {
  absl::MutexLock lock(&mu_);
  if (sources_.count(source) == 0 && !MakeRoom(1)) {
    rejected_ += families.size();
    return;
  }
  Admit(&families);
  Source& entry = sources_[source];
  entry.families = std::move(families);
  entry.forgotten = false;
}

void Aggregator::Forget(const std::string& source) {
  absl::MutexLock lock(&mu_);
  auto it = sources_.find(source);
  if (it == sources_.end() || it->second.forgotten) return;
  it->second.forgotten = true;
  it->second.forgotten_seq = ++forget_seq_;
}

std::vector<MetricFamily> Aggregator::Combined() const {
  absl::ReaderMutexLock lock(&mu_);
  MetricCombiner combiner(max_series_);
  for (const MetricFamily& family : past_) combiner.Add(family);
  for (const auto& [id, source] : sources_) {
    for (const MetricFamily& family : source.families) combiner.Add(family);
  }
  return combiner.Take();
}

uint64_t Aggregator::rejected_families() const {
  absl::ReaderMutexLock lock(&mu_);
  return rejected_;
}

}  // namespace manta::metrics
