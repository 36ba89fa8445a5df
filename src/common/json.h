// JSON text in and out. nlohmann's parser and serializer are templates that cost
// about 3 s of compile time in every file that reads or writes JSON text; these are
// instantiated once, in json.cc. Values are still nlohmann::json (or ordered_json,
// which keeps the order keys were inserted in).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace manta {

// The value `text` holds; a discarded value (is_discarded()) when it is not JSON.
// `ignore_comments`: /* */ and // comments are skipped.
nlohmann::json ParseJson(std::string_view text, bool ignore_comments = false);
nlohmann::ordered_json ParseOrderedJson(std::string_view text);

// The value as text: compact when `indent` < 0, else `indent` spaces per level.
// Throws nlohmann::json::type_error for a string that is not UTF-8, as dump() does.
std::string DumpJson(const nlohmann::json& value, int indent = -1);
std::string DumpJson(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace manta
