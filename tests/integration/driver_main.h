// The main() of the integration tests that drive a cluster through the public API
// (driver_main.cc). Such a program is three things: its tests; its own workers (a
// worker process re-runs main() with MANTA_WORKER_MODE set, and ray::Init() then
// serves tasks and never returns); and the child drivers its tests start. Several
// test files share one program (a CTest test runs it on its suites), so each file
// registers its child modes here instead of writing a main().
#pragma once

#include <functional>
#include <optional>

namespace manta::testing {

// A way the program runs instead of its tests: given the command line, the exit code
// when the command line asks for this mode, nothing otherwise.
using ChildMode = std::function<std::optional<int>(int argc, char** argv)>;

// Registers `mode` (at static initialization: `const bool k = AddChildMode(...)`);
// returns true. Modes are tried in the order registered; each must recognize only its
// own flags.
bool AddChildMode(ChildMode mode);

}  // namespace manta::testing
