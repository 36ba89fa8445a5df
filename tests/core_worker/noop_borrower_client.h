// A BorrowerClientInterface for tests where borrowers do not matter: every
// WaitForRefRemoved is answered at once, with no sub-borrowers.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "src/core_worker/reference_counter.h"

namespace manta::core {

class NoopBorrowerClient : public BorrowerClientInterface {
 public:
  void WaitForRefRemoved(const Address&, const ObjectID&, const Address&, std::optional<ObjectID>,
                         std::function<void(absl::Status, std::vector<BorrowedRef>)> done) override {
    done(absl::OkStatus(), {});
  }
};

}  // namespace manta::core
