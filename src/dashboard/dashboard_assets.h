// The dashboard's page (src/dashboard/static), built into the binary at build time
// (embed_assets.cmake): nothing is fetched from elsewhere at run time.
#pragma once

#include <string_view>
#include <vector>

namespace manta::dashboard {

struct Asset {
  const char* path;          // "/", "/static/app.js", ...
  const char* content_type;
  std::string_view body;
};

const std::vector<Asset>& Assets();

}  // namespace manta::dashboard
