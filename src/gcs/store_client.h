// StoreClientInterface: the durable key-value tables behind the GCS (ARCHITECTURE §10).
//
// A table is a hash of field -> bytes. Writes are durable when their callback runs
// with OK (write-through: the GCS acknowledges a client only after that). Two
// implementations: RedisStoreClient (one Redis hash per table) and
// InMemoryStoreClient (for unit tests). Methods may be called from the owning loop
// thread only; callbacks run later on that loop, never inline.
#pragma once

#include <functional>

#include "absl/functional/any_invocable.h"
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace manta::gcs {

class StoreClientInterface {
 public:
  using StatusCallback = absl::AnyInvocable<void(absl::Status)>;
  template <typename T>
  using ResultCallback = absl::AnyInvocable<void(absl::StatusOr<T>)>;

  virtual ~StoreClientInterface() = default;

  // Sets table[key] = value. With overwrite=false an existing value is kept.
  // Yields true when the key was newly added.
  virtual void AsyncPut(const std::string& table, const std::string& key, const std::string& value,
                        bool overwrite, ResultCallback<bool> callback) = 0;
  // Yields the value, or nullopt when absent.
  virtual void AsyncGet(const std::string& table, const std::string& key,
                        ResultCallback<std::optional<std::string>> callback) = 0;
  virtual void AsyncGetAll(const std::string& table,
                           ResultCallback<absl::flat_hash_map<std::string, std::string>> callback) = 0;
  // Yields the number of keys deleted.
  virtual void AsyncDelete(const std::string& table, const std::vector<std::string>& keys,
                           ResultCallback<int64_t> callback) = 0;
  virtual void AsyncExists(const std::string& table, const std::string& key,
                           ResultCallback<bool> callback) = 0;
  // Keys of `table` that start with `prefix`.
  virtual void AsyncGetKeys(const std::string& table, const std::string& prefix,
                            ResultCallback<std::vector<std::string>> callback) = 0;
  // Atomically adds `delta` to the integer at table[key] (absent = 0); yields the new value.
  virtual void AsyncIncrement(const std::string& table, const std::string& key, int64_t delta,
                              ResultCallback<int64_t> callback) = 0;
};

}  // namespace manta::gcs
