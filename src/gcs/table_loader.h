// ParseTableRows: how every GCS manager reads its table back from the store at start
// (ARCHITECTURE.md §10: a new GCS loads every table from Redis).
//
// A table maps an ID's binary form to a serialized protobuf row that carries the same
// ID. A row whose key is not a valid ID, that does not parse, or whose own ID differs
// from its key is logged and skipped (an empty value parses as a row with an empty
// ID, so garbage never becomes a live entry).
#pragma once

#include <string>

#include <glog/logging.h>

#include "absl/container/flat_hash_map.h"

namespace manta::gcs {

// `id_of(row)` is the row's own id field (binary).
template <typename Id, typename Row, typename IdOf>
absl::flat_hash_map<Id, Row> ParseTableRows(const absl::flat_hash_map<std::string, std::string>& rows,
                                            const std::string& table, IdOf id_of) {
  absl::flat_hash_map<Id, Row> parsed;
  for (const auto& [key, value] : rows) {
    Row row;
    auto id = Id::FromBinaryChecked(key);
    if (!id.ok() || !row.ParseFromString(value) || id_of(row) != key) {
      LOG(ERROR) << "skipping malformed " << table << " table entry of " << key.size() << " bytes";
      continue;
    }
    parsed.emplace(*id, std::move(row));
  }
  return parsed;
}

}  // namespace manta::gcs
