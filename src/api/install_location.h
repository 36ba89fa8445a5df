// Where the Manta executables of an installed package are, found from the location of
// the shared library (libmanta.so) this code was loaded from.
//
// A program built against an installed Manta (find_package(Manta), Manta::ray) loads
// <prefix>/lib/libmanta.so; the daemons it starts for a private cluster are in
// <prefix>/bin. The compile-time MANTA_INSTALL_BINDIR is wrong when the prefix was
// chosen only at install time (`cmake --install build --prefix P`); this is not.
// Internal to src/api. Thread-safe (no state).
#pragma once

#include <string>

namespace ray {
namespace internal {

// "<folder of the shared library holding this code>/<lib-to-bin path>", normally
// "<prefix>/lib/../bin" normalized to "<prefix>/bin". Empty when this code is linked
// into the program itself (the static manta_api of the build tree), or when the
// loader cannot tell where it came from. The folder is not checked for existence.
std::string InstalledBinDir();

}  // namespace internal
}  // namespace ray
