// The Prometheus text exposition format, version 0.0.4: what a daemon's /metrics
// endpoint serves (with kPrometheusContentType) for Prometheus to scrape.
//
// A pure function of its input; no state, any thread.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/metrics/metrics.h"

namespace manta::metrics {

inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// Appends `families` to *out, each as
//   # HELP <name> <description>     (omitted when the description is empty)
//   # TYPE <name> gauge|counter|histogram
//   <name>{<key>="<value>",...} <value>
// Names go through SanitizeName, tag keys likewise (without ':'). Kinds: a gauge is
// a gauge, a counter a counter, a Sum a gauge (it may go down), a histogram a
// histogram: cumulative <name>_bucket{...,le="<bound>"} samples, le="+Inf" (equal to
// the count), <name>_sum and <name>_count. Tags with an empty value are left out.
// Label values escape '\', '"' and newline, HELP text '\' and newline; bytes that
// are not UTF-8 become U+FFFD. Values: integers print exactly (3, -7,
// 1e+21 past 2^53's neighbourhood), others with the fewest digits that read back
// to the same double; +Inf, -Inf and NaN as Prometheus spells them.
//
// Families with the same sanitized name share one block (one HELP and TYPE, from
// the first): a later family of another exported type, and a series whose labels
// the block already has, are left out. Malformed histogram series (bucket counts
// not boundaries + 1) are left out.
void AppendPrometheusText(const std::vector<MetricFamily>& families, std::string* out);

// One sample value as the format spells it (see AppendPrometheusText).
std::string FormatPrometheusValue(double value);

// A sample read back from the text format.
struct ParsedSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
// The samples of `text` (comments skipped). Lines that are not samples of the
// format are skipped and counted in *malformed (may be null).
std::vector<ParsedSample> ParsePrometheusText(std::string_view text, size_t* malformed = nullptr);

}  // namespace manta::metrics
