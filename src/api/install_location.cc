#include "src/api/install_location.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>

// The path from the install's library folder to its executables' folder
// (CMAKE_INSTALL_LIBDIR -> CMAKE_INSTALL_BINDIR), set by src/api/CMakeLists.txt.
#ifndef MANTA_LIB_TO_BIN_DIR
#define MANTA_LIB_TO_BIN_DIR "../bin"
#endif

namespace ray {
namespace internal {

std::string InstalledBinDir() {
  Dl_info info;
  struct link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&InstalledBinDir), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    return "";
  }
  // The loader names the main program "" in its link map: then this code is not in a
  // shared library and there is no install location to derive.
  if (map->l_name == nullptr || map->l_name[0] == '\0') return "";
  std::error_code ec;
  std::filesystem::path library = std::filesystem::absolute(map->l_name, ec);
  if (ec) return "";
  return (library.parent_path() / MANTA_LIB_TO_BIN_DIR).lexically_normal().string();
}

}  // namespace internal
}  // namespace ray
