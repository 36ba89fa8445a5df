// GcsKVManager: the internal key-value store with namespaces, over one store table.
//
// A (namespace, key) pair is stored under the field "<len(ns)>:<ns><key>", which is
// unambiguous and keeps every key of a namespace under a common prefix.
// Loop thread only.
#pragma once

#include "protos/gcs.pb.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/store_client.h"

namespace manta::gcs {

inline constexpr char kKVTable[] = "kv";

class GcsKVManager {
 public:
  // Values over `max_value_bytes` are refused (InvalidArgument).
  GcsKVManager(StoreClientInterface& store, int64_t max_value_bytes)
      : store_(store), max_value_bytes_(max_value_bytes) {}

  void HandleGet(const rpc::InternalKVGetRequest& request, rpc::InternalKVGetReply* reply,
                 rpc::SendReply send_reply);
  void HandlePut(const rpc::InternalKVPutRequest& request, rpc::InternalKVPutReply* reply,
                 rpc::SendReply send_reply);
  void HandleDel(const rpc::InternalKVDelRequest& request, rpc::InternalKVDelReply* reply,
                 rpc::SendReply send_reply);
  void HandleExists(const rpc::InternalKVExistsRequest& request, rpc::InternalKVExistsReply* reply,
                    rpc::SendReply send_reply);
  void HandleKeys(const rpc::InternalKVKeysRequest& request, rpc::InternalKVKeysReply* reply,
                  rpc::SendReply send_reply);

  static std::string EncodeKey(const std::string& ns, const std::string& key);

 private:
  StoreClientInterface& store_;
  const int64_t max_value_bytes_;
};

}  // namespace manta::gcs
