// Where the autoscaler's daemon publishes its state (Autoscaler::State(): its nodes,
// the demand not met, what it did last) for `manta status` and the dashboard: the
// GCS's internal KV, namespace "autoscaler", key "state", as JSON.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "nlohmann/json.hpp"

namespace manta::autoscaler {

// Blocking calls with the cluster token, each with a 5 s deadline.
grpc::Status PublishAutoscalerState(const std::shared_ptr<grpc::Channel>& gcs, const nlohmann::json& state);
// `*state` becomes the published object, or null when no autoscaler published one
// (or it is not a JSON object); a failed call leaves it null.
grpc::Status ReadAutoscalerState(const std::shared_ptr<grpc::Channel>& gcs, nlohmann::json* state);

}  // namespace manta::autoscaler
