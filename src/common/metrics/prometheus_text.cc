#include "src/common/metrics/prometheus_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace manta::metrics {

namespace {

constexpr std::string_view kPromReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t PromUtf8Length(std::string_view s, size_t i) {
  const auto byte = [&s](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;   // no overlong forms
    if (c == 0xED) high = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < length || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// Appends `text` with '\' and newline escaped (and '"' when `quote`), and bytes
// that are not UTF-8 replaced.
void PromAppendEscaped(std::string_view text, bool quote, std::string* out) {
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && quote) {
      out->append("\\\"");
    } else {
      const size_t length = PromUtf8Length(text, i);
      if (length == 0) {
        out->append(kPromReplacementChar);
        ++i;
        continue;
      }
      out->append(text.substr(i, length));
      i += length;
      continue;
    }
    ++i;
  }
}

std::string PromLabelName(std::string_view key) {
  std::string name = SanitizeName(key);
  for (char& c : name) {
    if (c == ':') c = '_';
  }
  return name;
}

const char* PromTypeName(Kind kind) {
  switch (kind) {
    case Kind::kCounter:
      return "counter";
    case Kind::kHistogram:
      return "histogram";
    case Kind::kGauge:
    case Kind::kSum:
      break;
  }
  return "gauge";
}

// `k="v",...` for the tags with a value, without braces.
std::string PromLabels(const MetricDef& def, const SeriesValue& series) {
  std::string labels;
  for (size_t i = 0; i < def.tag_keys.size() && i < series.tag_values.size(); ++i) {
    if (series.tag_values[i].empty()) continue;
    if (!labels.empty()) labels.push_back(',');
    absl::StrAppend(&labels, PromLabelName(def.tag_keys[i]), "=\"");
    PromAppendEscaped(series.tag_values[i], true, &labels);
    labels.push_back('"');
  }
  return labels;
}

void PromAppendSample(std::string_view name, std::string_view labels, std::string_view value, std::string* out) {
  out->append(name);
  if (!labels.empty()) {
    out->push_back('{');
    out->append(labels);
    out->push_back('}');
  }
  out->push_back(' ');
  out->append(value);
  out->push_back('\n');
}

void PromAppendHistogram(const std::string& name, const MetricDef& def, const SeriesValue& series,
                         const std::string& labels, std::string* out) {
  const std::string bucket = name + "_bucket";
  const std::string prefix = labels.empty() ? "" : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < def.boundaries.size(); ++i) {
    cumulative += series.bucket_counts[i];
    PromAppendSample(bucket, absl::StrCat(prefix, "le=\"", FormatPrometheusValue(def.boundaries[i]), "\""),
                     absl::StrCat(cumulative), out);
  }
  cumulative += series.bucket_counts.back();
  PromAppendSample(bucket, prefix + "le=\"+Inf\"", absl::StrCat(cumulative), out);
  PromAppendSample(name + "_sum", labels, FormatPrometheusValue(series.sum), out);
  PromAppendSample(name + "_count", labels, absl::StrCat(cumulative), out);
}

// One block: HELP and TYPE from the first family, then the samples of every family
// of that type.
void PromAppendBlock(const std::string& name, const std::vector<const MetricFamily*>& families, std::string* out) {
  const MetricDef& first = families.front()->def;
  const std::string type = PromTypeName(first.kind);
  if (!first.description.empty()) {
    absl::StrAppend(out, "# HELP ", name, " ");
    PromAppendEscaped(first.description, false, out);
    out->push_back('\n');
  }
  absl::StrAppend(out, "# TYPE ", name, " ", type, "\n");
  std::set<std::string> seen_labels;
  for (const MetricFamily* family : families) {
    if (PromTypeName(family->def.kind) != type) continue;
    for (const SeriesValue& series : family->series) {
      const bool histogram = family->def.kind == Kind::kHistogram;
      if (histogram && series.bucket_counts.size() != family->def.boundaries.size() + 1) continue;
      std::string labels = PromLabels(family->def, series);
      if (!seen_labels.insert(labels).second) continue;
      if (histogram) {
        PromAppendHistogram(name, family->def, series, labels, out);
      } else {
        PromAppendSample(name, labels, FormatPrometheusValue(series.value), out);
      }
    }
  }
}

}  // namespace

std::string FormatPrometheusValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[40];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
    return buffer;
  }
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

void AppendPrometheusText(const std::vector<MetricFamily>& families, std::string* out) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const MetricFamily*>> blocks;
  for (const MetricFamily& family : families) {
    std::string name = SanitizeName(family.def.name);
    auto [it, inserted] = blocks.try_emplace(name);
    if (inserted) order.push_back(name);
    it->second.push_back(&family);
  }
  for (const std::string& name : order) PromAppendBlock(name, blocks[name], out);
}

namespace {

// Reads `key="value",...}` from `line` at *at (just after '{') into `labels`.
bool ParsePromLabels(std::string_view line, size_t* at, std::map<std::string, std::string>* labels) {
  size_t i = *at;
  while (i < line.size() && line[i] != '}') {
    const size_t eq = line.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
    std::string key(line.substr(i, eq - i));
    std::string value;
    size_t j = eq + 2;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) {
        ++j;
        value += line[j] == 'n' ? '\n' : line[j];
      } else {
        value += line[j];
      }
    }
    if (j >= line.size()) return false;
    (*labels)[std::move(key)] = std::move(value);
    i = j + 1;
    if (i < line.size() && line[i] == ',') ++i;
  }
  if (i >= line.size()) return false;
  *at = i + 1;
  return true;
}

bool ParsePromValue(std::string_view text, double* value) {
  if (text == "+Inf") return *value = std::numeric_limits<double>::infinity(), true;
  if (text == "-Inf") return *value = -std::numeric_limits<double>::infinity(), true;
  if (text == "NaN") return *value = std::numeric_limits<double>::quiet_NaN(), true;
  std::string s(text);
  char* end = nullptr;
  *value = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

}  // namespace

std::vector<ParsedSample> ParsePrometheusText(std::string_view text, size_t* malformed) {
  std::vector<ParsedSample> out;
  size_t bad = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    ParsedSample sample;
    size_t at = line.find_first_of("{ ");
    if (at == std::string_view::npos || at == 0) {
      ++bad;
      continue;
    }
    sample.name = std::string(line.substr(0, at));
    if (line[at] == '{') {
      ++at;
      if (!ParsePromLabels(line, &at, &sample.labels)) {
        ++bad;
        continue;
      }
    }
    if (at >= line.size() || line[at] != ' ') {
      ++bad;
      continue;
    }
    std::string_view rest = line.substr(at + 1);
    rest = rest.substr(0, rest.find(' '));  // an optional timestamp follows
    if (!ParsePromValue(rest, &sample.value)) {
      ++bad;
      continue;
    }
    out.push_back(std::move(sample));
  }
  if (malformed != nullptr) *malformed = bad;
  return out;
}

}  // namespace manta::metrics
