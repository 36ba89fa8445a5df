#include "src/autoscaler/autoscaler_state.h"

#include "protos/gcs.grpc.pb.h"
#include "src/common/json.h"
#include "src/common/rpc/call_with_token.h"

namespace manta::autoscaler {

namespace {

constexpr char kNamespace[] = "autoscaler";
constexpr char kKey[] = "state";
constexpr int64_t kDeadlineS = 5;

}  // namespace

grpc::Status PublishAutoscalerState(const std::shared_ptr<grpc::Channel>& gcs, const nlohmann::json& state) {
  auto stub = rpc::InternalKVGcsService::NewStub(gcs);
  rpc::InternalKVPutRequest request;
  request.set_namespace_(kNamespace);
  request.set_key(kKey);
  request.set_value(DumpJson(state));
  request.set_overwrite(true);
  rpc::InternalKVPutReply reply;
  return rpc::CallWithToken(*stub, &rpc::InternalKVGcsService::Stub::InternalKVPut, request, &reply, kDeadlineS);
}

grpc::Status ReadAutoscalerState(const std::shared_ptr<grpc::Channel>& gcs, nlohmann::json* state) {
  *state = nullptr;
  auto stub = rpc::InternalKVGcsService::NewStub(gcs);
  rpc::InternalKVGetRequest request;
  request.set_namespace_(kNamespace);
  request.set_key(kKey);
  rpc::InternalKVGetReply reply;
  grpc::Status s =
      rpc::CallWithToken(*stub, &rpc::InternalKVGcsService::Stub::InternalKVGet, request, &reply, kDeadlineS);
  if (!s.ok() || !reply.found()) return s;
  nlohmann::json parsed = ParseJson(reply.value());
  if (parsed.is_object()) *state = std::move(parsed);
  return s;
}

}  // namespace manta::autoscaler
