// User metrics, as in Ray's C++ API (same names and signatures): a driver, a task or
// an actor records gauges, counters, histograms and sums with tags; the node's raylet
// exports them on its Prometheus endpoint (`manta status` shows the port) as
//   <name>{<tag>="<value>",...} <value>
// with the name as given ('.', '-' and '/' become '_').
//
// A process sends its metrics to its raylet about once a second
// (metrics_report_period_ms) and when it exits; the raylet adds up counters, sums and
// histograms across the processes of the node and keeps the newest value of a gauge.
// Each metric keeps at most metrics_max_series_per_metric tag sets; records of
// further ones are dropped and counted (manta_metrics_series_dropped_total).
//
// Constructing a metric with a bad name, tag key or histogram boundaries, or with a
// name already used by a metric of another kind or other tags, throws
// ray::internal::RayException naming the problem. A tag the metric was not declared
// with is ignored; a declared one not given records "". Metrics are cheap to record
// and safe to use from any thread. A metric object may be destroyed and created
// again with the same definition: both record into the same series.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ray {

class Metric {
 public:
  virtual ~Metric() = 0;

  /// The metric's name, as given.
  std::string GetName() const;

  /// Records `value` for the series of `tags`: a gauge is set, a counter incremented
  /// (negative values are ignored), a histogram observes it, a sum adds it.
  void Record(double value, const std::unordered_map<std::string, std::string> &tags);

 protected:
  void Init(const std::string &name, const std::string &description, const std::string &unit, int kind,
            const std::vector<std::string> &tag_keys, const std::vector<double> &boundaries);

  std::string name_;
  void *metric_ = nullptr;
};

/// The last value set; it may go up and down (Prometheus gauge).
class Gauge : public Metric {
 public:
  Gauge(const std::string &name, const std::string &description, const std::string &unit,
        const std::vector<std::string> &tag_keys = {});
  void Set(double value, const std::unordered_map<std::string, std::string> &tags);
};

/// Observations counted in buckets bounded by `boundaries` (Prometheus histogram).
class Histogram : public Metric {
 public:
  Histogram(const std::string &name, const std::string &description, const std::string &unit,
            const std::vector<double> boundaries, const std::vector<std::string> &tag_keys = {});
  void Observe(double value, const std::unordered_map<std::string, std::string> &tags);
};

/// A total that only grows (Prometheus counter).
class Counter : public Metric {
 public:
  Counter(const std::string &name, const std::string &description, const std::string &unit,
          const std::vector<std::string> &tag_keys = {});
  void Inc(double value, const std::unordered_map<std::string, std::string> &tags);
};

/// A sum of the recorded values, which may be negative (exported as a gauge).
class Sum : public Metric {
 public:
  Sum(const std::string &name, const std::string &description, const std::string &unit,
      const std::vector<std::string> &tag_keys = {});
};

}  // namespace ray
