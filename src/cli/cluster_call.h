// One call of the `manta` commands to a cluster's daemon (the GCS or a raylet): with
// the cluster token and a deadline (src/common/rpc/call_with_token.h).
#pragma once

#include "src/common/rpc/call_with_token.h"

namespace manta::cli {

using rpc::CallWithToken;

}  // namespace manta::cli
