// A small blocking HTTP/1.0 GET for loopback and cluster-internal endpoints (the
// dashboard scraping the daemons' Prometheus endpoints): a deadline on the whole
// exchange and a cap on the reply.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace manta::http {

// The body of GET `path` from `host` (numeric IPv4) : `port`. Errors name the
// address: unreachable, a status other than 200, a reply over `max_bytes`, or no
// complete reply within `timeout_ms`.
absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path, int64_t timeout_ms,
                                    size_t max_bytes);

}  // namespace manta::http
