// ray::Gauge, ray::Counter, ray::Histogram and ray::Sum (include/ray/api/metric.h):
// handles on metrics of this process's user registry (metrics_proto.h), which the
// core worker sends to its raylet.
#include "ray/api/metric.h"

#include "ray/api/ray_exception.h"
#include "src/common/metrics/metrics_proto.h"

namespace ray {

namespace {

manta::metrics::Metric* Handle(void* metric) { return static_cast<manta::metrics::Metric*>(metric); }

}  // namespace

Metric::~Metric() = default;

std::string Metric::GetName() const { return name_; }

void Metric::Init(const std::string& name, const std::string& description, const std::string& unit, int kind,
                  const std::vector<std::string>& tag_keys, const std::vector<double>& boundaries) {
  name_ = name;
  manta::metrics::MetricDef def;
  def.name = name;
  def.description = description;
  def.unit = unit;
  def.kind = static_cast<manta::metrics::Kind>(kind);
  def.tag_keys = tag_keys;
  def.boundaries = boundaries;
  auto metric = manta::metrics::UserMetrics().Register(std::move(def));
  if (!metric.ok()) throw internal::RayException("cannot define metric '" + name + "': " +
                                                 std::string(metric.status().message()));
  metric_ = *metric;
}

void Metric::Record(double value, const std::unordered_map<std::string, std::string>& tags) {
  Handle(metric_)->Record(value, tags);
}

Gauge::Gauge(const std::string& name, const std::string& description, const std::string& unit,
             const std::vector<std::string>& tag_keys) {
  Init(name, description, unit, static_cast<int>(manta::metrics::Kind::kGauge), tag_keys, {});
}

void Gauge::Set(double value, const std::unordered_map<std::string, std::string>& tags) { Record(value, tags); }

Histogram::Histogram(const std::string& name, const std::string& description, const std::string& unit,
                     const std::vector<double> boundaries, const std::vector<std::string>& tag_keys) {
  Init(name, description, unit, static_cast<int>(manta::metrics::Kind::kHistogram), tag_keys, boundaries);
}

void Histogram::Observe(double value, const std::unordered_map<std::string, std::string>& tags) {
  Record(value, tags);
}

Counter::Counter(const std::string& name, const std::string& description, const std::string& unit,
                 const std::vector<std::string>& tag_keys) {
  Init(name, description, unit, static_cast<int>(manta::metrics::Kind::kCounter), tag_keys, {});
}

void Counter::Inc(double value, const std::unordered_map<std::string, std::string>& tags) { Record(value, tags); }

Sum::Sum(const std::string& name, const std::string& description, const std::string& unit,
         const std::vector<std::string>& tag_keys) {
  Init(name, description, unit, static_cast<int>(manta::metrics::Kind::kSum), tag_keys, {});
}

}  // namespace ray
