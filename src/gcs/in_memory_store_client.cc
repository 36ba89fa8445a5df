#include "src/gcs/in_memory_store_client.h"

#include "absl/strings/numbers.h"

namespace manta::gcs {

void InMemoryStoreClient::AsyncPut(const std::string& table, const std::string& key,
                                   const std::string& value, bool overwrite,
                                   ResultCallback<bool> callback) {
  auto& t = tables_[table];
  auto it = t.find(key);
  bool added = it == t.end();
  if (added || overwrite) t[key] = value;
  loop_.Post("InMemoryStore.Put", [callback = std::move(callback), added]() mutable { callback(added); });
}

void InMemoryStoreClient::AsyncGet(const std::string& table, const std::string& key,
                                   ResultCallback<std::optional<std::string>> callback) {
  std::optional<std::string> value;
  auto t = tables_.find(table);
  if (t != tables_.end()) {
    auto it = t->second.find(key);
    if (it != t->second.end()) value = it->second;
  }
  loop_.Post("InMemoryStore.Get", [callback = std::move(callback), value]() mutable { callback(value); });
}

void InMemoryStoreClient::AsyncGetAll(const std::string& table,
                                      ResultCallback<absl::flat_hash_map<std::string, std::string>> callback) {
  absl::flat_hash_map<std::string, std::string> all;
  auto t = tables_.find(table);
  if (t != tables_.end()) all.insert(t->second.begin(), t->second.end());
  loop_.Post("InMemoryStore.GetAll", [callback = std::move(callback), all = std::move(all)]() mutable { callback(all); });
}

void InMemoryStoreClient::AsyncDelete(const std::string& table, const std::vector<std::string>& keys,
                                      ResultCallback<int64_t> callback) {
  int64_t deleted = 0;
  auto t = tables_.find(table);
  if (t != tables_.end()) {
    for (const auto& k : keys) deleted += static_cast<int64_t>(t->second.erase(k));
  }
  loop_.Post("InMemoryStore.Delete", [callback = std::move(callback), deleted]() mutable { callback(deleted); });
}

void InMemoryStoreClient::AsyncExists(const std::string& table, const std::string& key,
                                      ResultCallback<bool> callback) {
  auto t = tables_.find(table);
  bool exists = t != tables_.end() && t->second.count(key) > 0;
  loop_.Post("InMemoryStore.Exists", [callback = std::move(callback), exists]() mutable { callback(exists); });
}

void InMemoryStoreClient::AsyncGetKeys(const std::string& table, const std::string& prefix,
                                       ResultCallback<std::vector<std::string>> callback) {
  std::vector<std::string> keys;
  auto t = tables_.find(table);
  if (t != tables_.end()) {
    for (auto it = t->second.lower_bound(prefix); it != t->second.end(); ++it) {
      if (it->first.compare(0, prefix.size(), prefix) != 0) break;
      keys.push_back(it->first);
    }
  }
  loop_.Post("InMemoryStore.GetKeys", [callback = std::move(callback), keys = std::move(keys)]() mutable { callback(keys); });
}

void InMemoryStoreClient::AsyncIncrement(const std::string& table, const std::string& key, int64_t delta,
                                         ResultCallback<int64_t> callback) {
  auto& t = tables_[table];
  auto it = t.find(key);
  int64_t current = 0;
  // Like Redis HINCRBY: only the canonical decimal text of an int64 counts as an
  // integer (not "", " 7", "+7" or "007"), and overflow is an error.
  bool is_integer = it == t.end() || (absl::SimpleAtoi(it->second, &current) &&
                                      std::to_string(current) == it->second);
  if (!is_integer || __builtin_add_overflow(current, delta, &current)) {
    loop_.Post("InMemoryStore.Increment", [callback = std::move(callback), table, key]() mutable {
      callback(absl::FailedPreconditionError("value of " + table + "/" + key +
                                             " is not an integer or would overflow"));
    });
    return;
  }
  t[key] = std::to_string(current);
  loop_.Post("InMemoryStore.Increment", [callback = std::move(callback), current]() mutable { callback(current); });
}

}  // namespace manta::gcs
