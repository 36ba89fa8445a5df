// Metrics: definitions and their errors, each kind's semantics, the series cap,
// callback metrics, the Aggregator's combining rules, and the Prometheus text format
// (checked line by line by a small validator).
#include "src/common/metrics/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "src/common/metrics/metrics_proto.h"
#include "src/common/metrics/prometheus_text.h"

namespace manta::metrics {
namespace {

MetricDef Def(std::string name, Kind kind, std::vector<std::string> tag_keys = {}, std::vector<double> boundaries = {}) {
  MetricDef def;
  def.name = std::move(name);
  def.description = "help";
  def.kind = kind;
  def.tag_keys = std::move(tag_keys);
  def.boundaries = std::move(boundaries);
  return def;
}

const MetricFamily* Find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const auto& family : families) {
    if (family.def.name == name) return &family;
  }
  return nullptr;
}

const SeriesValue* FindSeries(const MetricFamily& family, const std::vector<std::string>& tags) {
  for (const auto& series : family.series) {
    if (series.tag_values == tags) return &series;
  }
  return nullptr;
}

std::string ErrorOf(const absl::Status& status) { return std::string(status.message()); }

// ---- Definitions ------------------------------------------------------------------

TEST(MetricsDefTest, ValidateDefNamesWhatIsWrong) {
  EXPECT_TRUE(ValidateDef(Def("a_b:c", Kind::kGauge)).ok());
  EXPECT_TRUE(ValidateDef(Def("app.requests-total/x", Kind::kCounter)).ok());
  EXPECT_EQ(ErrorOf(ValidateDef(Def("", Kind::kGauge))), "metric name is empty");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("1abc", Kind::kGauge))),
            "metric name \"1abc\" is invalid: it must match [a-zA-Z_:][a-zA-Z0-9_:]* ('.', '-' and '/' are also "
            "accepted and become '_')");
  EXPECT_FALSE(ValidateDef(Def("a b", Kind::kGauge)).ok());
  EXPECT_FALSE(ValidateDef(Def("caf\xC3\xA9", Kind::kGauge)).ok());
  EXPECT_EQ(ErrorOf(ValidateDef(Def("m", Kind::kGauge, {"ok", "bad key"}))),
            "gauge \"m\": tag key \"bad key\" is invalid: it must match [a-zA-Z_][a-zA-Z0-9_]*");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("m", Kind::kGauge, {"9a"}))),
            "gauge \"m\": tag key \"9a\" is invalid: it must match [a-zA-Z_][a-zA-Z0-9_]*");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("m", Kind::kCounter, {"__name"}))),
            "counter \"m\": tag key \"__name\" is reserved (it starts with \"__\")");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("m", Kind::kSum, {"a", "b", "a"}))), "sum \"m\": tag key \"a\" appears twice");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("h", Kind::kHistogram, {"le"}, {1}))),
            "histogram \"h\": tag key \"le\" is reserved for bucket bounds");
  EXPECT_TRUE(ValidateDef(Def("g", Kind::kGauge, {"le"})).ok());
  EXPECT_EQ(ErrorOf(ValidateDef(Def("g", Kind::kGauge, {}, {1, 2}))), "gauge \"g\": only histograms take boundaries");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("h", Kind::kHistogram, {}, {1, 3, 2}))),
            "histogram \"h\": boundaries must be strictly increasing (2 after 3)");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("h", Kind::kHistogram, {}, {1, 1}))),
            "histogram \"h\": boundaries must be strictly increasing (1 after 1)");
  EXPECT_EQ(ErrorOf(ValidateDef(Def("h", Kind::kHistogram, {}, {1, std::numeric_limits<double>::infinity()}))),
            "histogram \"h\": boundary 1 is not finite");
  EXPECT_FALSE(ValidateDef(Def("h", Kind::kHistogram, {}, {std::nan("")})).ok());
  EXPECT_TRUE(ValidateDef(Def("h", Kind::kHistogram, {}, {})).ok());
  EXPECT_FALSE(ValidateDef(Def("k", static_cast<Kind>(42))).ok());
}

TEST(MetricsDefTest, SanitizeName) {
  EXPECT_EQ(SanitizeName("app.requests-total/x"), "app_requests_total_x");
  EXPECT_EQ(SanitizeName("ok_name:sub"), "ok_name:sub");
  EXPECT_EQ(SanitizeName("9lives"), "_9lives");
  EXPECT_EQ(SanitizeName(""), "_");
  EXPECT_EQ(SanitizeName("caf\xC3\xA9"), "caf__");
}

TEST(MetricsRegistryTest, RegisterReturnsTheSameMetricForTheSameDef) {
  Registry registry;
  auto a = registry.Register(Def("app.latency", Kind::kGauge, {"route"}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->def().name, "app_latency");
  MetricDef again = Def("app_latency", Kind::kGauge, {"route"});
  again.description = "another description";
  auto b = registry.Register(again);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ((*b)->def().description, "help");
}

TEST(MetricsRegistryTest, ConflictingDefsAreErrorsNamingBoth) {
  Registry registry;
  ASSERT_TRUE(registry.Register(Def("req", Kind::kCounter, {"path"})).ok());
  auto kind = registry.Register(Def("req", Kind::kGauge, {"path"}));
  EXPECT_EQ(kind.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrorOf(kind.status()),
            "cannot register gauge \"req\" with tag keys [path]: the name is taken by counter \"req\" with tag keys "
            "[path]");
  auto tags = registry.Register(Def("req", Kind::kCounter, {"path", "code"}));
  EXPECT_EQ(ErrorOf(tags.status()),
            "cannot register counter \"req\" with tag keys [path, code]: the name is taken by counter \"req\" with "
            "tag keys [path]");
  ASSERT_TRUE(registry.Register(Def("lat", Kind::kHistogram, {}, {1, 2})).ok());
  auto bounds = registry.Register(Def("lat", Kind::kHistogram, {}, {1, 5}));
  EXPECT_EQ(ErrorOf(bounds.status()),
            "cannot register histogram \"lat\" with tag keys [] and boundaries [1, 5]: the name is taken by histogram "
            "\"lat\" with tag keys [] and boundaries [1, 2]");
  // Names that sanitize alike are one name.
  auto dotted = registry.Register(Def("r.e.q", Kind::kCounter));
  ASSERT_TRUE(dotted.ok());
  auto dotted_conflict = registry.Register(Def("r-e-q", Kind::kGauge));
  EXPECT_EQ(ErrorOf(dotted_conflict.status()),
            "cannot register gauge \"r-e-q\" with tag keys []: the name is taken by counter \"r_e_q\" with tag keys []");
  auto invalid = registry.Register(Def("", Kind::kGauge));
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Kinds --------------------------------------------------------------------------

TEST(MetricsRecordTest, GaugeSetsCounterAddsSumAddsNegatives) {
  Registry registry;
  Metric* gauge = *registry.Register(Def("g", Kind::kGauge, {"k"}));
  Metric* counter = *registry.Register(Def("c", Kind::kCounter, {"k"}));
  Metric* sum = *registry.Register(Def("s", Kind::kSum, {"k"}));
  EXPECT_TRUE(gauge->Record(5, {{"k", "a"}}));
  EXPECT_TRUE(gauge->Record(-2, {{"k", "a"}}));
  EXPECT_TRUE(counter->Record(3, std::vector<std::string>{"a"}));
  EXPECT_TRUE(counter->Record(4, {{"k", "a"}}));
  EXPECT_TRUE(sum->Record(10, {{"k", "a"}}));
  EXPECT_TRUE(sum->Record(-4.5, {{"k", "a"}}));
  auto families = registry.Collect();
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[0].def.name, "c");  // sorted by name
  EXPECT_EQ(FindSeries(*Find(families, "g"), {"a"})->value, -2);
  EXPECT_EQ(FindSeries(*Find(families, "c"), {"a"})->value, 7);
  EXPECT_EQ(FindSeries(*Find(families, "s"), {"a"})->value, 5.5);
  EXPECT_GT(FindSeries(*Find(families, "g"), {"a"})->update_unix_ns, 0);
}

TEST(MetricsRecordTest, CountersRejectNegativeAndNonFiniteValues) {
  Registry registry;
  Metric* counter = *registry.Register(Def("c", Kind::kCounter));
  Metric* sum = *registry.Register(Def("s", Kind::kSum));
  EXPECT_TRUE(counter->Record(2, std::vector<std::string>{}));
  EXPECT_FALSE(counter->Record(-1, std::vector<std::string>{}));
  EXPECT_FALSE(counter->Record(std::numeric_limits<double>::infinity(), std::vector<std::string>{}));
  EXPECT_FALSE(counter->Record(std::nan(""), std::vector<std::string>{}));
  EXPECT_FALSE(sum->Record(std::nan(""), std::vector<std::string>{}));
  EXPECT_TRUE(counter->Record(0, std::vector<std::string>{}));
  EXPECT_EQ(counter->rejected(), 3u);
  EXPECT_EQ(sum->rejected(), 1u);
  EXPECT_EQ(Find(registry.Collect(), "c")->series.at(0).value, 2);
}

TEST(MetricsRecordTest, HistogramBucketsAreNotCumulative) {
  Registry registry;
  Metric* histogram = *registry.Register(Def("h", Kind::kHistogram, {"k"}, {1, 5, 10}));
  for (double v : {0.5, 1.0, 1.5, 5.0, 7.0, 10.0, 11.0, 1000.0, -3.0}) EXPECT_TRUE(histogram->Record(v, {{"k", "x"}}));
  EXPECT_FALSE(histogram->Record(std::nan(""), {{"k", "x"}}));
  EXPECT_FALSE(histogram->Record(-std::numeric_limits<double>::infinity(), {{"k", "x"}}));
  EXPECT_EQ(histogram->rejected(), 2u);
  auto families = registry.Collect();
  const SeriesValue* series = FindSeries(*Find(families, "h"), {"x"});
  ASSERT_NE(series, nullptr);
  // <=1: 0.5, 1, -3; (1,5]: 1.5, 5; (5,10]: 7, 10; >10: 11, 1000.
  EXPECT_EQ(series->bucket_counts, (std::vector<uint64_t>{3, 2, 2, 2}));
  EXPECT_EQ(series->count, 9u);
  EXPECT_DOUBLE_EQ(series->sum, 0.5 + 1 + 1.5 + 5 + 7 + 10 + 11 + 1000 - 3);
}

TEST(MetricsRecordTest, TagsByMapAndByPosition) {
  Registry registry;
  Metric* gauge = *registry.Register(Def("g", Kind::kGauge, {"a", "b"}));
  using TagMap = std::unordered_map<std::string, std::string>;
  EXPECT_TRUE(gauge->Record(1, TagMap{{"b", "y"}, {"unknown", "z"}}));  // a missing, unknown ignored
  EXPECT_TRUE(gauge->Record(2, std::vector<std::string>{"x"}));       // b missing
  EXPECT_TRUE(gauge->Record(3, std::vector<std::string>{"x", "y", "extra"}));
  EXPECT_TRUE(gauge->Record(4, {{"b", "y"}, {"a", "x"}, {"a", "ignored"}}));  // the same series as the last
  EXPECT_TRUE(gauge->Record(5, {{"unknown", "z"}, {"b", "y"}}));              // the same as the first
  auto family = *Find(registry.Collect(), "g");
  ASSERT_EQ(family.series.size(), 3u);
  EXPECT_EQ(family.series[0].tag_values, (std::vector<std::string>{"", "y"}));  // sorted by tags
  EXPECT_EQ(family.series[0].value, 5);
  EXPECT_EQ(family.series[1].tag_values, (std::vector<std::string>{"x", ""}));
  EXPECT_EQ(family.series[2].tag_values, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(family.series[2].value, 4);
}

TEST(MetricsRecordTest, ManyTagKeysTakeTheSlowPathCorrectly) {
  Registry registry;
  std::vector<std::string> keys;
  for (size_t i = 0; i < kMetricInlineTags + 3; ++i) keys.push_back("k" + std::to_string(i));
  Metric* counter = *registry.Register(Def("wide", Kind::kCounter, keys));
  std::vector<std::string> values(keys.size(), "v");
  EXPECT_TRUE(counter->Record(1, values));
  std::unordered_map<std::string, std::string> by_key;
  for (const auto& key : keys) by_key[key] = "v";
  EXPECT_TRUE(counter->Record(2, by_key));
  auto family = *Find(registry.Collect(), "wide");
  ASSERT_EQ(family.series.size(), 1u);
  EXPECT_EQ(family.series[0].value, 3);
}

TEST(MetricsRecordTest, SeriesCapDropsNewSeriesAndCountsThem) {
  Registry registry(/*max_series_per_metric=*/3);
  Metric* counter = *registry.Register(Def("c", Kind::kCounter, {"id"}));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(counter->Record(1, std::vector<std::string>{std::to_string(i)}), i < 3) << i;
  }
  EXPECT_TRUE(counter->Record(1, std::vector<std::string>{"0"}));  // existing series still record
  auto family = *Find(registry.Collect(), "c");
  EXPECT_EQ(family.series.size(), 3u);
  EXPECT_EQ(family.dropped_series, 7u);
  EXPECT_EQ(registry.dropped_series_total(), 7u);
  EXPECT_EQ(FindSeries(family, {"0"})->value, 2);
}

TEST(MetricsRecordTest, ConcurrentRecordsAllCount) {
  Registry registry;
  Metric* counter = *registry.Register(Def("c", Kind::kCounter, {"t"}));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([counter, t] {
      for (int i = 0; i < 5000; ++i) counter->Record(1, std::vector<std::string>{std::to_string(t % 2)});
    });
  }
  for (int i = 0; i < 20; ++i) registry.Collect();
  for (auto& thread : threads) thread.join();
  auto family = *Find(registry.Collect(), "c");
  EXPECT_EQ(FindSeries(family, {"0"})->value + FindSeries(family, {"1"})->value, 20000);
}

// ---- Callback metrics -----------------------------------------------------------------

TEST(MetricsCallbackTest, SeriesAreReplacedOnEveryCollect) {
  Registry registry(/*max_series_per_metric=*/2);
  std::vector<std::pair<std::vector<std::string>, double>> next = {{{"RUNNING"}, 3}, {{"PENDING"}, 1}};
  ASSERT_TRUE(registry
                  .RegisterCallback(Def("tasks", Kind::kGauge, {"state"}),
                                    [&next](Registry::CallbackSeries* out) { *out = next; })
                  .ok());
  auto first = *Find(registry.Collect(), "tasks");
  ASSERT_EQ(first.series.size(), 2u);
  EXPECT_EQ(FindSeries(first, {"RUNNING"})->value, 3);
  next = {{{"FINISHED"}, 7}, {{"FINISHED"}, 8}};  // a repeated tag set keeps the last value
  auto second = *Find(registry.Collect(), "tasks");
  ASSERT_EQ(second.series.size(), 1u);
  EXPECT_EQ(second.series[0].tag_values, std::vector<std::string>{"FINISHED"});
  EXPECT_EQ(second.series[0].value, 8);
  next = {{{"a"}, 1}, {{"b"}, 2}, {{"c"}, 3}, {{"d", "extra"}, 4}};
  auto third = *Find(registry.Collect(), "tasks");
  EXPECT_EQ(third.series.size(), 2u);
  EXPECT_EQ(third.dropped_series, 2u);
  EXPECT_EQ(registry.dropped_series_total(), 2u);
}

TEST(MetricsCallbackTest, RegistrationErrors) {
  Registry registry;
  auto noop = [](Registry::CallbackSeries*) {};
  EXPECT_EQ(ErrorOf(registry.RegisterCallback(Def("h", Kind::kHistogram, {}, {1}), noop)),
            "cannot register the callback histogram \"h\" with tag keys [] and boundaries [1]: only gauges and "
            "counters can be callbacks");
  ASSERT_TRUE(registry.Register(Def("taken", Kind::kGauge)).ok());
  EXPECT_EQ(ErrorOf(registry.RegisterCallback(Def("taken", Kind::kGauge), noop)),
            "cannot register the callback gauge \"taken\" with tag keys []: the name is taken by gauge \"taken\" with "
            "tag keys []");
  ASSERT_TRUE(registry.RegisterCallback(Def("cb", Kind::kCounter), noop).ok());
  EXPECT_EQ(registry.RegisterCallback(Def("cb", Kind::kCounter), noop).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrorOf(registry.Register(Def("cb", Kind::kCounter)).status()),
            "cannot register counter \"cb\" with tag keys []: the name is taken by the callback counter \"cb\" with tag "
            "keys []");
}

// ---- Aggregator ---------------------------------------------------------------------

MetricFamily Family(const MetricDef& def, std::vector<SeriesValue> series) {
  MetricFamily family;
  family.def = def;
  family.series = std::move(series);
  return family;
}

SeriesValue Value(std::vector<std::string> tags, double value, int64_t time_ns = 1) {
  SeriesValue series;
  series.tag_values = std::move(tags);
  series.value = value;
  series.update_unix_ns = time_ns;
  return series;
}

SeriesValue Buckets(std::vector<uint64_t> buckets, double sum) {
  SeriesValue series;
  series.bucket_counts = buckets;
  series.sum = sum;
  for (uint64_t b : buckets) series.count += b;
  return series;
}

double CombinedValue(const Aggregator& aggregator, const std::string& name, const std::vector<std::string>& tags) {
  auto families = aggregator.Combined();
  const MetricFamily* family = Find(families, name);
  if (family == nullptr) return -1;
  const SeriesValue* series = FindSeries(*family, tags);
  return series == nullptr ? -1 : series->value;
}

TEST(MetricsAggregatorTest, CountersSumsAndHistogramsAddUpAcrossSources) {
  Aggregator aggregator;
  const MetricDef counter = Def("c", Kind::kCounter, {"k"});
  const MetricDef sum = Def("s", Kind::kSum);
  const MetricDef histogram = Def("h", Kind::kHistogram, {}, {1, 2});
  aggregator.Update("w1", {Family(counter, {Value({"a"}, 2), Value({"b"}, 1)}), Family(sum, {Value({}, -3)}),
                           Family(histogram, {Buckets({1, 0, 2}, 9)})});
  aggregator.Update("w2", {Family(counter, {Value({"a"}, 5)}), Family(sum, {Value({}, 1)}),
                           Family(histogram, {Buckets({0, 4, 1}, 12)})});
  // A newer snapshot from w1 replaces its older one: snapshots are cumulative.
  aggregator.Update("w1", {Family(counter, {Value({"a"}, 3), Value({"b"}, 1)}), Family(sum, {Value({}, -3)}),
                           Family(histogram, {Buckets({1, 0, 2}, 9)})});
  EXPECT_EQ(CombinedValue(aggregator, "c", {"a"}), 8);
  EXPECT_EQ(CombinedValue(aggregator, "c", {"b"}), 1);
  EXPECT_EQ(CombinedValue(aggregator, "s", {}), -2);
  auto families = aggregator.Combined();
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[0].def.name, "c");
  const SeriesValue& h = Find(families, "h")->series.at(0);
  EXPECT_EQ(h.bucket_counts, (std::vector<uint64_t>{1, 4, 3}));
  EXPECT_EQ(h.count, 8u);
  EXPECT_EQ(h.sum, 21);
  EXPECT_EQ(aggregator.rejected_families(), 0u);
}

TEST(MetricsAggregatorTest, GaugeNewestUpdateWins) {
  Aggregator aggregator;
  const MetricDef gauge = Def("g", Kind::kGauge, {"k"});
  aggregator.Update("w1", {Family(gauge, {Value({"a"}, 10, 200), Value({"b"}, 1, 100)})});
  aggregator.Update("w2", {Family(gauge, {Value({"a"}, 20, 150), Value({"b"}, 2, 300)})});
  EXPECT_EQ(CombinedValue(aggregator, "g", {"a"}), 10);
  EXPECT_EQ(CombinedValue(aggregator, "g", {"b"}), 2);
}

TEST(MetricsAggregatorTest, ForgetKeepsTotalsAndAReturningSourceReplacesThem) {
  Aggregator aggregator;
  const MetricDef counter = Def("c", Kind::kCounter);
  aggregator.Update("w1", {Family(counter, {Value({}, 5)})});
  aggregator.Update("w2", {Family(counter, {Value({}, 7)})});
  aggregator.Forget("w1");
  aggregator.Forget("unknown");
  EXPECT_EQ(CombinedValue(aggregator, "c", {}), 12);
  aggregator.Update("w1", {Family(counter, {Value({}, 6)})});
  EXPECT_EQ(CombinedValue(aggregator, "c", {}), 13);
}

TEST(MetricsAggregatorTest, SourceCapFoldsForgottenSourcesAndKeepsTotals) {
  Aggregator aggregator(/*max_sources=*/2);
  const MetricDef counter = Def("c", Kind::kCounter);
  const MetricDef histogram = Def("h", Kind::kHistogram, {}, {1});
  double expected = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string source = "w" + std::to_string(i);
    aggregator.Update(source, {Family(counter, {Value({}, i + 1)}), Family(histogram, {Buckets({1, 1}, 3)})});
    expected += i + 1;
    aggregator.Forget(source);
    EXPECT_EQ(CombinedValue(aggregator, "c", {}), expected) << i;
  }
  EXPECT_EQ(Find(aggregator.Combined(), "h")->series.at(0).count, 20u);
  EXPECT_EQ(aggregator.rejected_families(), 0u);
  // Two live sources fill the cap: a third new one is rejected, a known one is not.
  Aggregator full(/*max_sources=*/2);
  full.Update("a", {Family(counter, {Value({}, 1)})});
  full.Update("b", {Family(counter, {Value({}, 1)})});
  full.Update("c", {Family(counter, {Value({}, 100)})});
  full.Update("a", {Family(counter, {Value({}, 2)})});
  EXPECT_EQ(CombinedValue(full, "c", {}), 3);
  EXPECT_EQ(full.rejected_families(), 1u);
}

TEST(MetricsAggregatorTest, ConflictingAndMalformedFamiliesAreRejected) {
  Aggregator aggregator;
  aggregator.Update("w1", {Family(Def("m", Kind::kCounter, {"k"}), {Value({"a"}, 1)}),
                           Family(Def("h", Kind::kHistogram, {}, {1, 2}), {Buckets({1, 1, 1}, 3)})});
  aggregator.Update("w2", {Family(Def("m", Kind::kGauge, {"k"}), {Value({"a"}, 50)}),          // other kind
                           Family(Def("h", Kind::kHistogram, {}, {1, 5}), {Buckets({1, 1, 1}, 3)}),  // other bounds
                           Family(Def("x", Kind::kCounter, {"k"}), {Value({}, 1)}),             // tags missing
                           Family(Def("y", Kind::kHistogram, {}, {1}), {Buckets({1, 1, 1}, 1)}),  // buckets
                           Family(Def("bad name", Kind::kGauge), {})});
  EXPECT_EQ(aggregator.rejected_families(), 5u);
  EXPECT_EQ(CombinedValue(aggregator, "m", {"a"}), 1);
  auto families = aggregator.Combined();
  EXPECT_EQ(families.size(), 2u);
  EXPECT_EQ(Find(families, "h")->series.at(0).count, 3u);
}

TEST(MetricsAggregatorTest, SeriesCapPerCombinedMetric) {
  Aggregator aggregator(/*max_sources=*/10, /*max_series_per_metric=*/3);
  const MetricDef counter = Def("c", Kind::kCounter, {"k"});
  aggregator.Update("w1", {Family(counter, {Value({"a"}, 1), Value({"b"}, 1), Value({"c"}, 1), Value({"d"}, 1)})});
  aggregator.Update("w2", {Family(counter, {Value({"a"}, 1), Value({"e"}, 1)})});
  auto family = *Find(aggregator.Combined(), "c");
  EXPECT_EQ(family.series.size(), 3u);
  EXPECT_EQ(FindSeries(family, {"a"})->value, 2);
  EXPECT_EQ(family.dropped_series, 2u);  // "d" at w1's snapshot, "e" when combined
}

TEST(MetricsAggregatorTest, RegistrySnapshotsRoundTrip) {
  Registry worker1, worker2;
  (*worker1.Register(Def("app.hits", Kind::kCounter, {"route"})))->Record(2, {{"route", "/a"}});
  (*worker2.Register(Def("app.hits", Kind::kCounter, {"route"})))->Record(3, {{"route", "/a"}});
  Aggregator aggregator;
  aggregator.Update("w1", worker1.Collect());
  aggregator.Update("w2", worker2.Collect());
  EXPECT_EQ(CombinedValue(aggregator, "app_hits", {"/a"}), 5);
}

// ---- Prometheus text ----------------------------------------------------------------

// Reads a label value escaped as the format says; false on a bad escape.
bool Unescape(const std::string& escaped, std::string* out) {
  out->clear();
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '\\') {
      out->push_back(escaped[i]);
      continue;
    }
    if (++i == escaped.size()) return false;
    if (escaped[i] == 'n') {
      out->push_back('\n');
    } else if (escaped[i] == '\\' || escaped[i] == '"') {
      out->push_back(escaped[i]);
    } else {
      return false;
    }
  }
  return true;
}

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped
  std::string value;
};

// Checks the exposition text line by line; returns the samples, or fails the test.
std::vector<Sample> ValidatePrometheusText(const std::string& text) {
  static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ([^ ]+)$)");
  static const std::regex kLabel(R"(^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\"(,|$))");
  static const std::regex kValue(R"(^([+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|\+Inf|-Inf|NaN)$)");
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|histogram)$)");
  static const std::regex kHelp(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) ((?:[^\\]|\\\\|\\n)*)$)");
  std::vector<Sample> samples;
  std::set<std::string> typed;
  std::string family, type;
  EXPECT_TRUE(text.empty() || text.back() == '\n');
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    std::smatch match;
    if (std::regex_match(line, match, kType)) {
      EXPECT_TRUE(typed.insert(match[1]).second) << "two TYPE lines for " << match[1];
      family = match[1];
      type = match[2];
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, match, kHelp)) << line;
      continue;
    }
    if (!std::regex_match(line, match, kSample)) {
      ADD_FAILURE() << "not a sample line: " << line;
      continue;
    }
    Sample sample{match[1], {}, match[4]};
    EXPECT_TRUE(std::regex_match(sample.value, kValue)) << line;
    std::string labels = match[3];
    std::smatch label;
    while (!labels.empty() && std::regex_search(labels, label, kLabel)) {
      std::string value;
      EXPECT_TRUE(Unescape(label[2], &value)) << line;
      EXPECT_TRUE(sample.labels.emplace(label[1], value).second) << "repeated label in " << line;
      labels = label.suffix();
    }
    EXPECT_TRUE(labels.empty()) << "bad labels in " << line;
    if (type == "histogram") {
      EXPECT_TRUE(sample.name == family + "_bucket" || sample.name == family + "_sum" || sample.name == family + "_count")
          << sample.name << " outside its family " << family;
    } else {
      EXPECT_EQ(sample.name, family) << "sample outside the last TYPE'd family";
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

// Histograms: per label set, buckets are cumulative and monotonic, +Inf == _count.
void CheckHistograms(const std::vector<Sample>& samples) {
  std::map<std::string, std::vector<std::pair<double, double>>> buckets;  // series -> (le, count)
  std::map<std::string, double> counts;
  for (const Sample& sample : samples) {
    std::map<std::string, std::string> rest = sample.labels;
    std::string le = rest["le"];
    rest.erase("le");
    std::string key = sample.name.substr(0, sample.name.rfind('_'));
    for (const auto& [k, v] : rest) key += "|" + k + "=" + v;
    if (sample.name.size() > 7 && sample.name.compare(sample.name.size() - 7, 7, "_bucket") == 0) {
      buckets[key].emplace_back(le == "+Inf" ? INFINITY : std::stod(le), std::stod(sample.value));
    } else if (sample.name.size() > 6 && sample.name.compare(sample.name.size() - 6, 6, "_count") == 0) {
      counts[key] = std::stod(sample.value);
    }
  }
  for (const auto& [key, list] : buckets) {
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_LT(list[i - 1].first, list[i].first) << key;
      EXPECT_LE(list[i - 1].second, list[i].second) << key;
    }
    ASSERT_FALSE(list.empty());
    EXPECT_TRUE(std::isinf(list.back().first)) << key;
    EXPECT_EQ(list.back().second, counts[key]) << key;
  }
}

TEST(PrometheusTextTest, FormatValues) {
  EXPECT_EQ(FormatPrometheusValue(3), "3");
  EXPECT_EQ(FormatPrometheusValue(-7), "-7");
  EXPECT_EQ(FormatPrometheusValue(0.25), "0.25");
  EXPECT_EQ(FormatPrometheusValue(0.1), "0.1");
  EXPECT_EQ(FormatPrometheusValue(123456789012345.0), "123456789012345");
  EXPECT_EQ(FormatPrometheusValue(1e21), "1e+21");
  EXPECT_EQ(std::stod(FormatPrometheusValue(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(FormatPrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatPrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatPrometheusValue(std::nan("")), "NaN");
}

TEST(PrometheusTextTest, ExactOutputForASmallRegistry) {
  Registry registry;
  MetricDef counter = Def("app.hits", Kind::kCounter, {"route", "code"});
  counter.description = "Hits \\ by\nroute";
  (*registry.Register(counter))->Record(3, {{"route", "/a"}, {"code", "200"}});
  (*registry.Register(counter))->Record(1, {{"route", "/b"}});
  (*registry.Register(Def("s", Kind::kSum)))->Record(-2.5, std::vector<std::string>{});
  Metric* histogram = *registry.Register(Def("lat", Kind::kHistogram, {}, {0.5, 2}));
  for (double v : {0.1, 1.0, 1.5, 9.0}) histogram->Record(v, std::vector<std::string>{});
  std::string text;
  AppendPrometheusText(registry.Collect(), &text);
  EXPECT_EQ(text,
            "# HELP app_hits Hits \\\\ by\\nroute\n"
            "# TYPE app_hits counter\n"
            "app_hits{route=\"/a\",code=\"200\"} 3\n"
            "app_hits{route=\"/b\"} 1\n"
            "# HELP lat help\n"
            "# TYPE lat histogram\n"
            "lat_bucket{le=\"0.5\"} 1\n"
            "lat_bucket{le=\"2\"} 3\n"
            "lat_bucket{le=\"+Inf\"} 4\n"
            "lat_sum 11.6\n"
            "lat_count 4\n"
            "# HELP s help\n"
            "# TYPE s gauge\n"
            "s -2.5\n");
  ValidatePrometheusText(text);
}

TEST(PrometheusTextTest, NastyLabelsAndNamesPassTheValidator) {
  Registry registry;
  const std::vector<std::string> nasty = {"quote\"d",  "back\\slash", "new\nline", "caf\xC3\xA9 \xE2\x9C\x93",
                                          "\\\"\\n",   "{a=\"b\"}",   "trail\\",   "bad utf8 \xC3\x28 \xFF",
                                          "   spaces "};
  Metric* gauge = *registry.Register(Def("my.app.gauge", Kind::kGauge, {"v", "other"}));
  Metric* histogram = *registry.Register(Def("my-app/latency", Kind::kHistogram, {"v"}, {0.001, 0.1, 1, 10, 1e6}));
  for (size_t i = 0; i < nasty.size(); ++i) {
    gauge->Record(static_cast<double>(i), std::vector<std::string>{nasty[i], i % 2 ? "" : "x"});
    for (int k = 0; k <= static_cast<int>(i); ++k) histogram->Record(std::pow(10.0, k - 3), {{"v", nasty[i]}});
  }
  gauge->Record(std::numeric_limits<double>::infinity(), std::vector<std::string>{"inf"});
  gauge->Record(std::nan(""), std::vector<std::string>{"nan"});
  // A second family of the same sanitized name and another type is left out.
  std::vector<MetricFamily> families = registry.Collect();
  families.push_back(Family(Def("my_app_gauge", Kind::kCounter), {Value({}, 1)}));
  std::string text;
  AppendPrometheusText(families, &text);
  std::vector<Sample> samples = ValidatePrometheusText(text);
  CheckHistograms(samples);
  std::set<std::string> round_trip;
  for (const Sample& sample : samples) {
    if (sample.name == "my_app_gauge" && sample.labels.count("v")) round_trip.insert(sample.labels.at("v"));
  }
  EXPECT_EQ(text.find("\nmy_app_gauge 1\n"), std::string::npos);  // the counter of the same name
  for (const std::string& value : nasty) {
    if (value.find("bad utf8") == 0) continue;
    EXPECT_EQ(round_trip.count(value), 1u) << value;
  }
  EXPECT_EQ(round_trip.count("bad utf8 \xEF\xBF\xBD( \xEF\xBF\xBD"), 1u);
  EXPECT_NE(text.find("my_app_gauge{v=\"inf\"} +Inf\n"), std::string::npos);
  EXPECT_NE(text.find("my_app_gauge{v=\"nan\"} NaN\n"), std::string::npos);
  EXPECT_EQ(text.find("other=\"\""), std::string::npos);  // empty values are left out
}

TEST(PrometheusTextTest, FamiliesOfOneNameShareABlock) {
  std::vector<MetricFamily> families = {
      Family(Def("x.y", Kind::kGauge, {"k"}), {Value({"a"}, 1)}),
      Family(Def("other", Kind::kGauge), {Value({}, 5)}),
      Family(Def("x_y", Kind::kSum, {"k"}), {Value({"a"}, 2), Value({"b"}, 3)}),
  };
  std::string text;
  AppendPrometheusText(families, &text);
  EXPECT_EQ(text,
            "# HELP x_y help\n# TYPE x_y gauge\nx_y{k=\"a\"} 1\nx_y{k=\"b\"} 3\n"
            "# HELP other help\n# TYPE other gauge\nother 5\n");
  ValidatePrometheusText(text);
}

TEST(PrometheusTextTest, AggregatedHistogramsStayConsistent) {
  Aggregator aggregator;
  const MetricDef histogram = Def("h", Kind::kHistogram, {"k"}, {1, 2, 3});
  for (int w = 0; w < 5; ++w) {
    SeriesValue series = Buckets({static_cast<uint64_t>(w), 1, 0, 2}, w * 1.5);
    series.tag_values = {w % 2 ? "odd" : "even"};
    aggregator.Update("w" + std::to_string(w), {Family(histogram, {series})});
  }
  std::string text;
  AppendPrometheusText(aggregator.Combined(), &text);
  CheckHistograms(ValidatePrometheusText(text));
  EXPECT_NE(text.find("h_count{k=\"even\"} 15\n"), std::string::npos) << text;
}

// ---- Snapshots on the wire (metrics_proto.h) ----------------------------------------

void ExpectSameFamily(const MetricFamily& a, const MetricFamily& b) {
  EXPECT_EQ(a.def.name, b.def.name);
  EXPECT_EQ(a.def.description, b.def.description);
  EXPECT_EQ(a.def.unit, b.def.unit);
  EXPECT_EQ(a.def.kind, b.def.kind);
  EXPECT_EQ(a.def.tag_keys, b.def.tag_keys);
  EXPECT_EQ(a.def.boundaries, b.def.boundaries);
  EXPECT_EQ(a.dropped_series, b.dropped_series);
  ASSERT_EQ(a.series.size(), b.series.size());
  for (size_t i = 0; i < a.series.size(); ++i) {
    EXPECT_EQ(a.series[i].tag_values, b.series[i].tag_values) << i;
    EXPECT_EQ(a.series[i].value, b.series[i].value) << i;
    EXPECT_EQ(a.series[i].bucket_counts, b.series[i].bucket_counts) << i;
    EXPECT_EQ(a.series[i].sum, b.series[i].sum) << i;
    EXPECT_EQ(a.series[i].count, b.series[i].count) << i;
    EXPECT_EQ(a.series[i].update_unix_ns, b.series[i].update_unix_ns) << i;
  }
}

// A family of `kind` with two series (tagged by route and code), some dropped.
MetricFamily SampleFamily(Kind kind) {
  const bool histogram = kind == Kind::kHistogram;
  MetricFamily family;
  family.def = Def(std::string("app.") + KindName(kind), kind, {"route", "code"},
                   histogram ? std::vector<double>{0.5, 1, 10} : std::vector<double>{});
  family.def.unit = "ms";
  for (int i = 0; i < 2; ++i) {
    SeriesValue series = histogram ? Buckets({1, 0, static_cast<uint64_t>(i) + 2, 4}, 123.25 + i) : Value({}, -2.5 + i);
    series.tag_values = {"/r" + std::to_string(i), i == 0 ? "" : "200"};
    series.update_unix_ns = 1700000000123456789 + i;
    family.series.push_back(std::move(series));
  }
  family.dropped_series = 17;
  return family;
}

TEST(MetricsProtoTest, EveryKindRoundTrips) {
  const std::vector<std::pair<Kind, rpc::MetricFamilyData::Kind>> kinds = {
      {Kind::kGauge, rpc::MetricFamilyData::GAUGE},
      {Kind::kCounter, rpc::MetricFamilyData::COUNTER},
      {Kind::kSum, rpc::MetricFamilyData::SUM},
      {Kind::kHistogram, rpc::MetricFamilyData::HISTOGRAM}};
  for (const auto& [kind, wire_kind] : kinds) {
    SCOPED_TRACE(KindName(kind));
    const MetricFamily family = SampleFamily(kind);
    rpc::MetricFamilyData data;
    FamilyToProto(family, &data);
    EXPECT_EQ(data.kind(), wire_kind);
    EXPECT_EQ(data.name(), family.def.name);
    EXPECT_EQ(data.series_size(), 2);
    // Through the bytes, as a raylet receives it.
    rpc::MetricFamilyData received;
    ASSERT_TRUE(received.ParseFromString(data.SerializeAsString()));
    auto back = FamilyFromProto(received);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameFamily(family, *back);
  }
}

TEST(MetricsProtoTest, ARegistrysSnapshotRoundTrips) {
  Registry registry;
  (*registry.Register(Def("hits", Kind::kCounter, {"route"})))->Record(3, {{"route", "/a"}});
  (*registry.Register(Def("lat", Kind::kHistogram, {}, {1, 2})))->Record(1.5, std::vector<std::string>{});
  (*registry.Register(Def("temp", Kind::kGauge)))->Record(-40, std::vector<std::string>{});
  const auto families = registry.Collect();
  ASSERT_EQ(families.size(), 3u);
  for (const MetricFamily& family : families) {
    rpc::MetricFamilyData data;
    FamilyToProto(family, &data);
    auto back = FamilyFromProto(data);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameFamily(family, *back);
  }
  // An empty family (no series yet) too.
  rpc::MetricFamilyData data;
  FamilyToProto(MetricFamily{Def("empty", Kind::kSum), {}, 0}, &data);
  auto back = FamilyFromProto(data);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->series.empty());
}

TEST(MetricsProtoTest, MalformedFamiliesAreRefusedNamingTheFault) {
  rpc::MetricFamilyData good;
  FamilyToProto(SampleFamily(Kind::kHistogram), &good);
  ASSERT_TRUE(FamilyFromProto(good).ok());
  rpc::MetricFamilyData bad = good;
  bad.set_name("bad name");
  EXPECT_EQ(FamilyFromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()),
            "metric name \"bad name\" is invalid: it must match [a-zA-Z_:][a-zA-Z0-9_:]* ('.', '-' and '/' are also "
            "accepted and become '_')");
  bad.set_name("");
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()), "metric name is empty");

  bad = good;
  bad.mutable_series(1)->mutable_tag_values()->RemoveLast();
  EXPECT_EQ(FamilyFromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()), "metric 'app.histogram': a series has 1 tag values for 2 tag keys");
  bad.mutable_series(1)->add_tag_values("x");
  bad.mutable_series(1)->add_tag_values("y");
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()), "metric 'app.histogram': a series has 3 tag values for 2 tag keys");

  bad = good;
  bad.mutable_series(0)->mutable_bucket_counts()->RemoveLast();
  EXPECT_EQ(FamilyFromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()), "metric 'app.histogram': a series has 3 bucket counts, not 4");
  // Bucket counts on a metric that is not a histogram.
  rpc::MetricFamilyData gauge;
  FamilyToProto(SampleFamily(Kind::kGauge), &gauge);
  gauge.mutable_series(0)->add_bucket_counts(1);
  EXPECT_EQ(ErrorOf(FamilyFromProto(gauge).status()), "metric 'app.gauge': a series has 1 bucket counts, not 0");

  bad = good;
  bad.set_kind(static_cast<rpc::MetricFamilyData::Kind>(7));
  EXPECT_EQ(FamilyFromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()), "metric 'app.histogram' has an unknown kind");
  bad.set_kind(static_cast<rpc::MetricFamilyData::Kind>(-1));
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()), "metric 'app.histogram' has an unknown kind");

  // The definition's own faults, as ValidateDef names them.
  bad = good;
  bad.set_kind(rpc::MetricFamilyData::GAUGE);
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()), "gauge \"app.histogram\": only histograms take boundaries");
  bad = good;
  bad.set_boundaries(1, 0.1);
  EXPECT_EQ(ErrorOf(FamilyFromProto(bad).status()),
            "histogram \"app.histogram\": boundaries must be strictly increasing (0.1 after 0.5)");
}

}  // namespace
}  // namespace manta::metrics
