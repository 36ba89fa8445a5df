#include "src/gcs/redis_store_client.h"

#include <glog/logging.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include "absl/strings/numbers.h"

namespace manta::gcs {
namespace {

RedisValue Decode(const redisReply* r) {
  RedisValue v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = RedisValue::Type::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = RedisValue::Type::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = RedisValue::Type::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = RedisValue::Type::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = RedisValue::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Decode(r->element[i]));
      break;
    default:
      v.type = RedisValue::Type::kNil;
  }
  return v;
}

timeval ToTimeval(int64_t ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

// Opens an authenticated connection, or explains why not.
absl::StatusOr<redisContext*> OpenConnection(const RedisStoreClient::Options& o) {
  std::string where = o.host + ":" + std::to_string(o.port);
  redisContext* c = redisConnectWithTimeout(o.host.c_str(), o.port, ToTimeval(o.connect_timeout_ms));
  if (c == nullptr) return absl::UnavailableError("cannot connect to Redis at " + where);
  if (c->err) {
    std::string err = c->errstr;
    redisFree(c);
    return absl::UnavailableError("cannot connect to Redis at " + where + ": " + err);
  }
  redisSetTimeout(c, ToTimeval(o.command_timeout_ms));
  if (!o.password.empty()) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %b", o.password.data(), o.password.size()));
    if (r == nullptr) {  // I/O error or timeout: Redis is not answering, not refusing.
      std::string err = c->errstr;
      redisFree(c);
      return absl::UnavailableError("Redis at " + where + " does not answer AUTH: " + err);
    }
    if (r->type == REDIS_REPLY_ERROR) {
      std::string err(r->str, r->len);
      freeReplyObject(r);
      redisFree(c);
      return absl::PermissionDeniedError("Redis at " + where + " refused the password: " + err);
    }
    freeReplyObject(r);
  }
  // Fail now, not at the first write, when Redis is up but unusable (e.g. needs AUTH).
  auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
  if (r == nullptr) {  // I/O error or timeout (e.g. a hung Redis): retryable.
    std::string err = c->errstr;
    redisFree(c);
    return absl::UnavailableError("Redis at " + where + " does not answer PING: " + err);
  }
  if (r->type == REDIS_REPLY_ERROR) {
    std::string err(r->str, r->len);
    freeReplyObject(r);
    redisFree(c);
    return absl::PermissionDeniedError("Redis at " + where + " refuses PING: " + err);
  }
  freeReplyObject(r);
  return c;
}

absl::StatusOr<RedisValue> RunCommand(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (r == nullptr) return absl::UnavailableError(std::string("Redis I/O error: ") + c->errstr);
  RedisValue v = Decode(r);
  freeReplyObject(r);
  if (v.type == RedisValue::Type::kError) {
    return absl::InternalError("Redis " + args[0] + " failed: " + v.str);
  }
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisStoreClient>> RedisStoreClient::Connect(EventLoop& loop, Options options) {
  auto conn = OpenConnection(options);
  if (!conn.ok()) return conn.status();
  std::unique_ptr<RedisStoreClient> client(new RedisStoreClient(loop, std::move(options)));
  client->context_ = *conn;
  client->thread_ = std::thread([c = client.get()] { c->ThreadMain(); });
  return client;
}

RedisStoreClient::RedisStoreClient(EventLoop& loop, Options options)
    : loop_(loop), options_(std::move(options)) {}

RedisStoreClient::~RedisStoreClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (context_ != nullptr) redisFree(context_);
}

absl::StatusOr<RedisValue> RedisStoreClient::RunOnce(const Options& options,
                                                     const std::vector<std::string>& args) {
  auto conn = OpenConnection(options);
  if (!conn.ok()) return conn.status();
  auto result = RunCommand(*conn, args);
  redisFree(*conn);
  return result;
}

absl::Status RedisStoreClient::Reconnect() {
  if (context_ != nullptr) {
    redisFree(context_);
    context_ = nullptr;
  }
  auto conn = OpenConnection(options_);
  if (!conn.ok()) return conn.status();
  context_ = *conn;
  LOG(INFO) << "reconnected to Redis at " << options_.host << ":" << options_.port;
  return absl::OkStatus();
}

absl::StatusOr<RedisValue> RedisStoreClient::Execute(const std::vector<std::string>& args) {
  absl::Status last = absl::UnavailableError("no connection to Redis");
  for (int64_t attempt = 0; attempt <= options_.retry_attempts; ++attempt) {
    if (context_ == nullptr || context_->err) {
      if (attempt > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(100 << attempt, 2000)));
      }
      last = Reconnect();
      if (!last.ok()) continue;
    }
    auto result = RunCommand(context_, args);
    if (result.ok() || result.status().code() != absl::StatusCode::kUnavailable) return result;
    last = result.status();
    LOG(WARNING) << "Redis command " << args[0] << " failed (" << last.message() << "), reconnecting";
  }
  return last;
}

void RedisStoreClient::Submit(std::vector<std::string> args,
                              absl::AnyInvocable<void(absl::StatusOr<RedisValue>)> on_reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(args), std::move(on_reply));
  }
  cv_.notify_one();
}

void RedisStoreClient::ThreadMain() {
  // hiredis writes with write(2): writing to a connection Redis has closed raises
  // SIGPIPE, which by default kills the process. Blocked on this thread, the write
  // fails with EPIPE instead and the command is retried or failed.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);
  for (;;) {
    std::pair<std::vector<std::string>, absl::AnyInvocable<void(absl::StatusOr<RedisValue>)>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping with nothing left to do
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<RedisValue> result = Execute(item.first);
    loop_.Post("RedisStore.Reply", [cb = std::move(item.second), result = std::move(result)]() mutable { cb(std::move(result)); });
  }
}

void RedisStoreClient::AsyncPut(const std::string& table, const std::string& key, const std::string& value,
                                bool overwrite, ResultCallback<bool> callback) {
  Submit({overwrite ? "HSET" : "HSETNX", HashName(table), key, value},
         [callback = std::move(callback)](absl::StatusOr<RedisValue> r) mutable {
           if (!r.ok()) return callback(r.status());
           callback(r->integer > 0);
         });
}

void RedisStoreClient::AsyncGet(const std::string& table, const std::string& key,
                                ResultCallback<std::optional<std::string>> callback) {
  Submit({"HGET", HashName(table), key}, [callback = std::move(callback)](absl::StatusOr<RedisValue> r) mutable {
    if (!r.ok()) return callback(r.status());
    if (r->type == RedisValue::Type::kNil) return callback(std::optional<std::string>());
    callback(std::optional<std::string>(std::move(r->str)));
  });
}

void RedisStoreClient::AsyncGetAll(const std::string& table,
                                   ResultCallback<absl::flat_hash_map<std::string, std::string>> callback) {
  Submit({"HGETALL", HashName(table)}, [callback = std::move(callback)](absl::StatusOr<RedisValue> r) mutable {
    if (!r.ok()) return callback(r.status());
    absl::flat_hash_map<std::string, std::string> all;
    for (size_t i = 0; i + 1 < r->elements.size(); i += 2) {
      all[r->elements[i].str] = std::move(r->elements[i + 1].str);
    }
    callback(std::move(all));
  });
}

void RedisStoreClient::AsyncDelete(const std::string& table, const std::vector<std::string>& keys,
                                   ResultCallback<int64_t> callback) {
  if (keys.empty()) {
    loop_.Post("RedisStore.Delete", [callback = std::move(callback)]() mutable { callback(int64_t{0}); });
    return;
  }
  std::vector<std::string> args = {"HDEL", HashName(table)};
  args.insert(args.end(), keys.begin(), keys.end());
  Submit(std::move(args), [callback = std::move(callback)](absl::StatusOr<RedisValue> r) mutable {
    if (!r.ok()) return callback(r.status());
    callback(r->integer);
  });
}

void RedisStoreClient::AsyncExists(const std::string& table, const std::string& key,
                                   ResultCallback<bool> callback) {
  Submit({"HEXISTS", HashName(table), key}, [callback = std::move(callback)](absl::StatusOr<RedisValue> r) mutable {
    if (!r.ok()) return callback(r.status());
    callback(r->integer == 1);
  });
}

void RedisStoreClient::AsyncGetKeys(const std::string& table, const std::string& prefix,
                                    ResultCallback<std::vector<std::string>> callback) {
  // HKEYS then filter: keys are binary, so a glob MATCH would need escaping, and GCS
  // tables are small.
  Submit({"HKEYS", HashName(table)}, [callback = std::move(callback), prefix](absl::StatusOr<RedisValue> r) mutable {
    if (!r.ok()) return callback(r.status());
    std::vector<std::string> keys;
    for (auto& e : r->elements) {
      if (e.str.compare(0, prefix.size(), prefix) == 0) keys.push_back(std::move(e.str));
    }
    std::sort(keys.begin(), keys.end());
    callback(std::move(keys));
  });
}

void RedisStoreClient::AsyncIncrement(const std::string& table, const std::string& key, int64_t delta,
                                      ResultCallback<int64_t> callback) {
  Submit({"HINCRBY", HashName(table), key, std::to_string(delta)}, [callback = std::move(callback)](absl::StatusOr<RedisValue> r) mutable {
    if (!r.ok()) return callback(r.status());
    callback(r->integer);
  });
}

}  // namespace manta::gcs
