#include "src/gcs/gcs_kv_manager.h"

namespace manta::gcs {
namespace {
constexpr size_t kMaxKeyBytes = 64 * 1024;
}  // namespace

std::string GcsKVManager::EncodeKey(const std::string& ns, const std::string& key) {
  return std::to_string(ns.size()) + ":" + ns + key;
}

void GcsKVManager::HandleGet(const rpc::InternalKVGetRequest& request, rpc::InternalKVGetReply* reply,
                             rpc::SendReply send_reply) {
  store_.AsyncGet(kKVTable, EncodeKey(request.namespace_(), request.key()),
                  [reply, send_reply = std::move(send_reply)](absl::StatusOr<std::optional<std::string>> r) mutable {
                    if (!r.ok()) return std::move(send_reply)(r.status());
                    reply->set_found(r->has_value());
                    if (r->has_value()) reply->set_value(**r);
                    std::move(send_reply)(absl::OkStatus());
                  });
}

void GcsKVManager::HandlePut(const rpc::InternalKVPutRequest& request, rpc::InternalKVPutReply* reply,
                             rpc::SendReply send_reply) {
  if (request.key().empty() || request.key().size() > kMaxKeyBytes) {
    return std::move(send_reply)(absl::InvalidArgumentError("InternalKVPut: key must be 1 to 65536 bytes"));
  }
  if (static_cast<int64_t>(request.value().size()) > max_value_bytes_) {
    return std::move(send_reply)(absl::InvalidArgumentError(
        "InternalKVPut: a value of " + std::to_string(request.value().size()) + " bytes is over the limit of " +
        std::to_string(max_value_bytes_) + " (gcs_max_kv_value_bytes)"));
  }
  store_.AsyncPut(kKVTable, EncodeKey(request.namespace_(), request.key()), request.value(), request.overwrite(),
                  [reply, send_reply = std::move(send_reply)](absl::StatusOr<bool> r) mutable {
                    if (!r.ok()) return std::move(send_reply)(r.status());
                    reply->set_added(*r);
                    std::move(send_reply)(absl::OkStatus());
                  });
}

void GcsKVManager::HandleDel(const rpc::InternalKVDelRequest& request, rpc::InternalKVDelReply* reply,
                             rpc::SendReply send_reply) {
  std::string encoded = EncodeKey(request.namespace_(), request.key());
  auto on_deleted = [reply, send_reply = std::move(send_reply)](absl::StatusOr<int64_t> r) mutable {
    if (!r.ok()) return std::move(send_reply)(r.status());
    reply->set_deleted_num(static_cast<int32_t>(*r));
    std::move(send_reply)(absl::OkStatus());
  };
  if (!request.del_by_prefix()) {
    store_.AsyncDelete(kKVTable, {encoded}, std::move(on_deleted));
    return;
  }
  store_.AsyncGetKeys(kKVTable, encoded,
                      [this, on_deleted = std::move(on_deleted)](absl::StatusOr<std::vector<std::string>> keys) mutable {
                        if (!keys.ok()) return on_deleted(keys.status());
                        store_.AsyncDelete(kKVTable, *keys, std::move(on_deleted));
                      });
}

void GcsKVManager::HandleExists(const rpc::InternalKVExistsRequest& request, rpc::InternalKVExistsReply* reply,
                                rpc::SendReply send_reply) {
  store_.AsyncExists(kKVTable, EncodeKey(request.namespace_(), request.key()),
                     [reply, send_reply = std::move(send_reply)](absl::StatusOr<bool> r) mutable {
                       if (!r.ok()) return std::move(send_reply)(r.status());
                       reply->set_exists(*r);
                       std::move(send_reply)(absl::OkStatus());
                     });
}

void GcsKVManager::HandleKeys(const rpc::InternalKVKeysRequest& request, rpc::InternalKVKeysReply* reply,
                              rpc::SendReply send_reply) {
  std::string ns_prefix = EncodeKey(request.namespace_(), "");
  store_.AsyncGetKeys(kKVTable, ns_prefix + request.prefix(),
                      [reply, ns_prefix, send_reply = std::move(send_reply)](
                          absl::StatusOr<std::vector<std::string>> r) mutable {
                        if (!r.ok()) return std::move(send_reply)(r.status());
                        for (const auto& k : *r) reply->add_results(k.substr(ns_prefix.size()));
                        std::move(send_reply)(absl::OkStatus());
                      });
}

}  // namespace manta::gcs
