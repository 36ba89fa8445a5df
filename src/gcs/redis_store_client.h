// RedisStoreClient: StoreClientInterface over a real redis-server (ARCHITECTURE §10).
//
// Each table is one Redis hash named "<key_prefix><table>"; fields are keys, values
// are the stored bytes. Commands run on one dedicated thread with a synchronous
// hiredis connection: hiredis 0.14 has no Boost.Asio adapter, and a private thread
// keeps a slow Redis from stalling the GCS loop. That thread is the only one touching
// the connection; commands run in submission order (so writes are ordered), and
// results are posted back to the loop. A broken connection is re-established
// (with AUTH) and the command retried up to `retry_attempts` times before its
// callback gets UNAVAILABLE. Public methods: loop thread only.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "src/common/event_loop.h"
#include "src/gcs/store_client.h"

struct redisContext;

namespace manta::gcs {

// A decoded Redis reply, free of hiredis types.
struct RedisValue {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;
  int64_t integer = 0;
  std::vector<RedisValue> elements;
};

class RedisStoreClient : public StoreClientInterface {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 6379;
    std::string password;
    // Prepended to every table name, e.g. "manta:default:".
    std::string key_prefix = "manta:default:";
    int64_t connect_timeout_ms = 3000;
    int64_t command_timeout_ms = 5000;
    int64_t retry_attempts = 5;
  };

  // Connects (and authenticates) before returning, so an unreachable Redis or a wrong
  // password is reported at start-up: UNAVAILABLE / PERMISSION_DENIED naming the address.
  static absl::StatusOr<std::unique_ptr<RedisStoreClient>> Connect(EventLoop& loop, Options options);
  ~RedisStoreClient() override;

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

  // Runs one command synchronously on the caller's thread through a separate
  // connection. For tools and tests (e.g. FLUSHALL); not for the GCS loop.
  static absl::StatusOr<RedisValue> RunOnce(const Options& options, const std::vector<std::string>& args);

 private:
  RedisStoreClient(EventLoop& loop, Options options);
  absl::Status Reconnect();
  absl::StatusOr<RedisValue> Execute(const std::vector<std::string>& args);
  // Queues `args` for the Redis thread; `on_reply` runs on the loop.
  void Submit(std::vector<std::string> args, absl::AnyInvocable<void(absl::StatusOr<RedisValue>)> on_reply);
  void ThreadMain();
  std::string HashName(const std::string& table) const { return options_.key_prefix + table; }

  EventLoop& loop_;
  const Options options_;
  redisContext* context_ = nullptr;  // Redis thread only (and the constructor).

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::deque<std::pair<std::vector<std::string>, absl::AnyInvocable<void(absl::StatusOr<RedisValue>)>>>
      queue_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace manta::gcs
