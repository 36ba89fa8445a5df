// Sets the process's NetworkLimits (src/common/rpc/network_limits.h) for a test's
// duration, and puts the previous ones back after.
#pragma once

#include "src/common/rpc/network_limits.h"

namespace manta::testing {

class ScopedNetworkLimits {
 public:
  explicit ScopedNetworkLimits(const rpc::NetworkLimits& limits) : saved_(rpc::CurrentNetworkLimits()) {
    rpc::SetNetworkLimits(limits);
  }
  ~ScopedNetworkLimits() { rpc::SetNetworkLimits(saved_); }
  ScopedNetworkLimits(const ScopedNetworkLimits&) = delete;
  ScopedNetworkLimits& operator=(const ScopedNetworkLimits&) = delete;

 private:
  rpc::NetworkLimits saved_;
};

}  // namespace manta::testing
