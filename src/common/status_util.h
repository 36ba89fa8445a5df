// absl::Status helpers used across Manta.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function when `expr` yields a non-OK status.
#define MANTA_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status _manta_status = (expr);         \
    if (!_manta_status.ok()) return _manta_status; \
  } while (0)

#define MANTA_STATUS_CONCAT_INNER(a, b) a##b
#define MANTA_STATUS_CONCAT(a, b) MANTA_STATUS_CONCAT_INNER(a, b)

// Assigns the value of a StatusOr expression to `lhs`, or returns its error.
#define MANTA_ASSIGN_OR_RETURN(lhs, expr) \
  MANTA_ASSIGN_OR_RETURN_IMPL(MANTA_STATUS_CONCAT(_manta_statusor_, __LINE__), lhs, expr)
#define MANTA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

namespace manta {

// Prefixes `context` to a status message, keeping its code.
inline absl::Status Annotate(const absl::Status& status, const std::string& context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), context + ": " + std::string(status.message()));
}

}  // namespace manta
