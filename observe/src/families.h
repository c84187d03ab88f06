// Prometheus metric families built by hand for the observers' /metrics (ingest_endpoints.cc,
// replica_endpoints.cc), and the UTF-8 repair their label values need.
//
// Thread safety: a value type with no internal synchronization.

#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "weir/observe/metered_store.h"

namespace weir::observe::internal {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// `text` with each byte that does not belong to a well-formed UTF-8 sequence replaced by U+FFFD.
// Prometheus refuses a whole scrape over one label value that is not UTF-8, and label values
// (tables, operators' shard names) come from outside.
inline std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
    const unsigned char c = byte(0);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 0;
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (byte(k) & 0xC0) == 0x80;
    // No overlong forms, no surrogates, nothing past U+10FFFF.
    if (ok && n == 2) ok = c >= 0xC2;
    if (ok && n == 3) ok = !(c == 0xE0 && byte(1) < 0xA0) && !(c == 0xED && byte(1) >= 0xA0);
    if (ok && n == 4)
      ok = c <= 0xF4 && !(c == 0xF0 && byte(1) < 0x90) && !(c == 0xF4 && byte(1) >= 0x90);
    if (ok) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  return out;
}

// Builds metric families: one per name, samples added with labels.
class Families {
 public:
  MetricFamily& family(const std::string& name, const std::string& help, MetricType type) {
    for (auto& f : families_) {
      if (f.name == name) return f;
    }
    families_.push_back(MetricFamily{name, help, type, {}});
    return families_.back();
  }
  void add(const std::string& name, const std::string& help, MetricType type, double value,
           std::vector<ClientMetric::Label> labels = {}) {
    ClientMetric m;
    m.label = std::move(labels);
    for (auto& label : m.label) label.value = valid_utf8(label.value);
    if (type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    family(name, help, type).metric.push_back(std::move(m));
  }
  void counter(const std::string& name, const std::string& help, double value,
               std::vector<ClientMetric::Label> labels = {}) {
    add(name, help, MetricType::Counter, value, std::move(labels));
  }
  void gauge(const std::string& name, const std::string& help, double value,
             std::vector<ClientMetric::Label> labels = {}) {
    add(name, help, MetricType::Gauge, value, std::move(labels));
  }
  void histogram(const std::string& name, const std::string& help, const LatencyHistogram& h) {
    ClientMetric m;
    const auto counts = h.cumulative();
    for (size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
      m.histogram.bucket.push_back({counts[i], LatencyHistogram::kBounds[i]});
    }
    m.histogram.bucket.push_back({counts.back(), std::numeric_limits<double>::infinity()});
    m.histogram.sample_count = counts.back();
    m.histogram.sample_sum = h.sum_seconds();
    family(name, help, MetricType::Histogram).metric.push_back(std::move(m));
  }
  std::string text() const { return prometheus::TextSerializer().Serialize(families_); }

 private:
  std::vector<MetricFamily> families_;
};

}  // namespace weir::observe::internal
