#include "src/common/rpc/fault_injection.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace manta::rpc {

absl::StatusOr<FaultInjector> FaultInjector::Parse(const std::string& spec) {
  FaultInjector injector;
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::string e(absl::StripAsciiWhitespace(entry));
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError("fault injection entry '" + e + "' is not Method=action");
    }
    Rule rule;
    rule.method = e.substr(0, eq);
    std::string action = e.substr(eq + 1);
    size_t at = action.find('@');
    if (at != std::string::npos) {
      if (!absl::SimpleAtod(action.substr(at + 1), &rule.probability) || rule.probability < 0 ||
          rule.probability > 1) {
        return absl::InvalidArgumentError("fault injection entry '" + e + "' has a bad probability");
      }
      action = action.substr(0, at);
    }
    if (action == "drop_request") {
      rule.decision.kind = FaultKind::kDropRequest;
    } else if (action == "drop_reply") {
      rule.decision.kind = FaultKind::kDropReply;
    } else if (action.rfind("delay:", 0) == 0) {
      rule.decision.kind = FaultKind::kDelay;
      if (!absl::SimpleAtoi(action.substr(6), &rule.decision.delay_ms) || rule.decision.delay_ms < 0) {
        return absl::InvalidArgumentError("fault injection entry '" + e + "' has a bad delay");
      }
    } else {
      return absl::InvalidArgumentError("fault injection entry '" + e + "': unknown action '" +
                                        action + "'");
    }
    injector.rules_.push_back(rule);
  }
  return injector;
}

FaultDecision FaultInjector::Decide(const std::string& method) {
  if (rules_.empty()) return {};
  std::lock_guard<std::mutex> lock(mu_);
  for (const Rule& rule : rules_) {
    if (rule.method != "*" && rule.method != method) continue;
    if (rule.probability < 1.0 && std::uniform_real_distribution<double>(0, 1)(rng_) >= rule.probability) {
      continue;
    }
    return rule.decision;
  }
  return {};
}

}  // namespace manta::rpc
