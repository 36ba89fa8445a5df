#include "driver_main.h"

#include <ray/api.h>

#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"

namespace manta::testing {
namespace {

std::vector<ChildMode>& Modes() {
  static auto* modes = new std::vector<ChildMode>();
  return *modes;
}

}  // namespace

bool AddChildMode(ChildMode mode) {
  Modes().push_back(std::move(mode));
  return true;
}

}  // namespace manta::testing

int main(int argc, char** argv) {
  // Worker processes re-run main(): ray::Init() serves tasks and never returns.
  if (std::getenv("MANTA_WORKER_MODE") != nullptr) ray::Init();
  for (const manta::testing::ChildMode& mode : manta::testing::Modes()) {
    if (std::optional<int> code = mode(argc, argv)) return *code;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
