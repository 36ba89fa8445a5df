// InMemoryStoreClient: StoreClientInterface over maps, for unit tests and for a GCS
// run without persistence. Callbacks are posted to the loop. Loop thread only.
#pragma once

#include <map>

#include "src/common/event_loop.h"
#include "src/gcs/store_client.h"

namespace manta::gcs {

class InMemoryStoreClient : public StoreClientInterface {
 public:
  explicit InMemoryStoreClient(EventLoop& loop) : loop_(loop) {}

  void AsyncPut(const std::string& table, const std::string& key, const std::string& value,
                bool overwrite, ResultCallback<bool> callback) override;
  void AsyncGet(const std::string& table, const std::string& key,
                ResultCallback<std::optional<std::string>> callback) override;
  void AsyncGetAll(const std::string& table,
                   ResultCallback<absl::flat_hash_map<std::string, std::string>> callback) override;
  void AsyncDelete(const std::string& table, const std::vector<std::string>& keys,
                   ResultCallback<int64_t> callback) override;
  void AsyncExists(const std::string& table, const std::string& key, ResultCallback<bool> callback) override;
  void AsyncGetKeys(const std::string& table, const std::string& prefix,
                    ResultCallback<std::vector<std::string>> callback) override;
  void AsyncIncrement(const std::string& table, const std::string& key, int64_t delta,
                      ResultCallback<int64_t> callback) override;

 private:
  EventLoop& loop_;
  // Ordered so prefix scans are cheap and results deterministic.
  std::map<std::string, std::map<std::string, std::string>> tables_;
};

}  // namespace manta::gcs
