// ClientPool: one client per peer address, created on first use and kept.
//
// Every process that talks to many peers of one kind (the core worker to raylets and
// other core workers, the GCS to raylets and actor workers) keeps its clients in a
// pool keyed by a string (usually "ip:port"). Thread-safe: the pool takes a mutex;
// the clients themselves must be thread-safe if several threads use them.
#pragma once

#include <algorithm>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace manta::rpc {

// The callback of an asynchronous client call: the status and, when OK, the reply.
template <typename Reply>
using ReplyCallback = std::function<void(const absl::Status&, Reply&&)>;

template <typename Interface>
class ClientPool {
 public:
  using Factory = std::function<std::shared_ptr<Interface>(const std::string& address)>;
  explicit ClientPool(Factory factory) : factory_(std::move(factory)) {}
  std::shared_ptr<Interface> Get(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto& slot = clients_[address];
    if (!slot) slot = factory_(address);
    return slot;
  }
  // As Get, and files the client under `group` (the peer's node, say), so that
  // RemoveGroup finds it when the whole group is gone.
  std::shared_ptr<Interface> Get(const std::string& address, const std::string& group) {
    absl::MutexLock lock(&mu_);
    auto& slot = clients_[address];
    if (!slot) slot = factory_(address);
    groups_[address] = group;
    return slot;
  }
  // Forgets (as Disconnect) every current client filed under `group`, and returns
  // them so that the caller can fail their calls.
  std::vector<std::shared_ptr<Interface>> RemoveGroup(const std::string& group) {
    std::vector<std::shared_ptr<Interface>> removed;
    absl::MutexLock lock(&mu_);
    for (auto it = groups_.begin(); it != groups_.end();) {
      auto next = std::next(it);
      if (it->second == group) {
        auto client = clients_.find(it->first);
        if (client != clients_.end()) {
          removed.push_back(client->second);
          retired_.push_back(std::move(client->second));
          clients_.erase(client);
        }
        groups_.erase(it);
      }
      it = next;
    }
    return removed;
  }
  // Forgets a client (a peer that died); later Gets create a fresh one. Calls in
  // flight on it still complete; the pool keeps counting them (ForEach).
  void Disconnect(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto it = clients_.find(address);
    groups_.erase(address);
    if (it == clients_.end()) return;
    retired_.push_back(std::move(it->second));
    clients_.erase(it);
  }
  // Forgets every client, current or retired, for which `dead` is true (closed
  // connections with nothing in flight).
  void Prune(const std::function<bool(Interface&)>& dead) {
    absl::MutexLock lock(&mu_);
    for (auto it = clients_.begin(); it != clients_.end();) {
      auto next = std::next(it);
      if (dead(*it->second)) {
        groups_.erase(it->first);
        clients_.erase(it);
      }
      it = next;
    }
    retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                  [&](const std::shared_ptr<Interface>& c) { return dead(*c); }),
                   retired_.end());
  }
  // Runs `fn` on every client, current and retired.
  void ForEach(const std::function<void(Interface&)>& fn) {
    absl::MutexLock lock(&mu_);
    for (auto& [address, client] : clients_) fn(*client);
    for (auto& client : retired_) fn(*client);
  }
  // Runs `fn` on every current client outside the pool's mutex, so `fn` may use
  // the pool (and callbacks it triggers may too).
  void ForEachShared(const std::function<void(const std::shared_ptr<Interface>&)>& fn) {
    std::vector<std::shared_ptr<Interface>> clients;
    {
      absl::MutexLock lock(&mu_);
      clients.reserve(clients_.size());
      for (auto& [address, client] : clients_) clients.push_back(client);
    }
    for (const auto& client : clients) fn(client);
  }

 private:
  Factory factory_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Interface>> clients_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Interface>> retired_ ABSL_GUARDED_BY(mu_);
  // address -> group, for the clients Get filed under one.
  absl::flat_hash_map<std::string, std::string> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::rpc
