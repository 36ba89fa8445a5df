#include "src/common/json.h"

namespace manta {

nlohmann::json ParseJson(std::string_view text, bool ignore_comments) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false, ignore_comments);
}

nlohmann::ordered_json ParseOrderedJson(std::string_view text) {
  return nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string DumpJson(const nlohmann::json& value, int indent) { return value.dump(indent); }

std::string DumpJson(const nlohmann::ordered_json& value, int indent) { return value.dump(indent); }

}  // namespace manta
