// Fault injection for RPC clients, for tests (config: testing_rpc_failure).
//
// Spec: comma-separated entries "Method=action[@probability]" where Method is an RPC
// name ("HealthCheck") or "*", and action is one of
//   drop_request   the request is never sent; the call fails at its deadline
//   drop_reply     the request is sent and handled, the reply is discarded
//   delay:MS       the request is sent MS milliseconds late
// e.g. "HealthCheck=drop_request,RegisterNode=delay:200@0.5". Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::rpc {

enum class FaultKind { kNone, kDropRequest, kDropReply, kDelay };

struct FaultDecision {
  FaultKind kind = FaultKind::kNone;
  int64_t delay_ms = 0;
};

class FaultInjector {
 public:
  // Parses `spec`; an empty spec injects nothing. InvalidArgument names a bad entry.
  static absl::StatusOr<FaultInjector> Parse(const std::string& spec);
  FaultInjector() = default;
  FaultInjector(const FaultInjector& other) : rules_(other.rules_) {}
  FaultInjector& operator=(const FaultInjector& other) {
    rules_ = other.rules_;
    return *this;
  }

  // What to do with the next call of `method`.
  FaultDecision Decide(const std::string& method);
  bool empty() const { return rules_.empty(); }

 private:
  struct Rule {
    std::string method;
    FaultDecision decision;
    double probability = 1.0;
  };
  std::vector<Rule> rules_;
  std::mutex mu_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace manta::rpc
