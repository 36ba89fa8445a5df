#include "src/autoscaler/autoscaler_config.h"

#include <cmath>
#include <set>

#include "nlohmann/json.hpp"
#include "src/common/json.h"
#include "src/common/util.h"

namespace manta::autoscaler {

namespace {

using nlohmann::json;

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError("autoscaler config: " + what); }

// Every key of `object` (named `where`) must be one of `known`.
absl::Status OnlyKnownKeys(const json& object, const std::string& where, const std::set<std::string>& known) {
  for (const auto& [key, value] : object.items()) {
    if (known.count(key) == 0) return Bad("unknown key \"" + key + "\" in " + where);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> NonNegativeNumber(const json& object, const std::string& key, double fallback) {
  if (!object.contains(key)) return fallback;
  const json& v = object.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    return Bad("\"" + key + "\" must be a non-negative number");
  }
  return v.get<double>();
}

absl::StatusOr<int> Count(const json& object, const std::string& key, int fallback, const std::string& where) {
  if (!object.contains(key)) return fallback;
  const json& v = object.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000) {
    return Bad("\"" + key + "\" of " + where + " must be a whole number from 0 to 100000");
  }
  return v.get<int>();
}

absl::StatusOr<std::string> Text(const json& object, const std::string& key, const std::string& where) {
  if (!object.contains(key)) return std::string();
  if (!object.at(key).is_string()) return Bad("\"" + key + "\" of " + where + " must be a string");
  return object.at(key).get<std::string>();
}

absl::StatusOr<NodeTypeConfig> ParseNodeType(const std::string& name, const json& t) {
  const std::string where = "node type \"" + name + "\"";
  if (!t.is_object()) return Bad(where + " must be an object");
  if (auto s = OnlyKnownKeys(t, where, {"resources", "min_workers", "max_workers", "node_config"}); !s.ok()) return s;
  NodeTypeConfig type;
  type.name = name;
  if (!t.contains("resources") || !t.at("resources").is_object() || t.at("resources").empty()) {
    return Bad(where + " needs \"resources\", e.g. {\"CPU\": 2}");
  }
  for (const auto& [resource, quantity] : t.at("resources").items()) {
    if (!quantity.is_number() || quantity.get<double>() < 0 || !std::isfinite(quantity.get<double>())) {
      return Bad("resource \"" + resource + "\" of " + where + " must be a non-negative number");
    }
    type.resources[resource] = quantity.get<double>();
  }
  type.resources = scheduling::QuantizeResources(type.resources);
  auto min = Count(t, "min_workers", 0, where);
  if (!min.ok()) return min.status();
  auto max = Count(t, "max_workers", *min, where);
  if (!max.ok()) return max.status();
  if (*max < *min) return Bad("max_workers of " + where + " is below its min_workers");
  type.min_workers = *min;
  type.max_workers = *max;
  if (t.contains("node_config")) {
    if (!t.at("node_config").is_object()) return Bad("\"node_config\" of " + where + " must be an object");
    type.node_config_json = DumpJson(t.at("node_config"));
  }
  return type;
}

absl::StatusOr<ProviderConfig> ParseProvider(const json& p, const std::vector<NodeTypeConfig>& types) {
  if (!p.is_object() || !p.contains("type")) return Bad("\"provider\" needs a \"type\": command or kubernetes");
  ProviderConfig provider;
  auto type = Text(p, "type", "provider");
  if (!type.ok()) return type.status();
  provider.type = *type;
  if (provider.type == "command") {
    if (auto s = OnlyKnownKeys(p, "provider", {"type", "launch", "terminate", "timeout_s"}); !s.ok()) return s;
    auto launch = Text(p, "launch", "provider");
    auto terminate = Text(p, "terminate", "provider");
    if (!launch.ok()) return launch.status();
    if (!terminate.ok()) return terminate.status();
    if (launch->empty() || terminate->empty()) return Bad("the command provider needs \"launch\" and \"terminate\"");
    provider.launch_command = *launch;
    provider.terminate_command = *terminate;
    auto timeout = NonNegativeNumber(p, "timeout_s", 120);
    if (!timeout.ok()) return timeout.status();
    provider.command_timeout_ms = static_cast<int64_t>(*timeout * 1000);
    return provider;
  }
  if (provider.type != "kubernetes") return Bad("unknown provider type \"" + provider.type + "\"");
  const std::set<std::string> known = {"type", "api_server", "namespace", "token_file", "ca_file", "deployments"};
  if (auto s = OnlyKnownKeys(p, "provider", known); !s.ok()) return s;
  for (auto [key, field] : {std::pair{"api_server", &provider.api_server},
                            std::pair{"namespace", &provider.kube_namespace},
                            std::pair{"token_file", &provider.token_file}, std::pair{"ca_file", &provider.ca_file}}) {
    auto v = Text(p, key, "provider");
    if (!v.ok()) return v.status();
    *field = *v;
  }
  if (provider.kube_namespace.empty()) provider.kube_namespace = "default";
  if (!p.contains("deployments") || !p.at("deployments").is_object()) {
    return Bad("the kubernetes provider needs \"deployments\": {node type: Deployment name}");
  }
  for (const auto& [type_name, deployment] : p.at("deployments").items()) {
    if (!deployment.is_string() || deployment.get<std::string>().empty()) {
      return Bad("the Deployment of node type \"" + type_name + "\" must be a name");
    }
    provider.deployments[type_name] = deployment.get<std::string>();
  }
  for (const NodeTypeConfig& t : types) {
    if (provider.deployments.count(t.name) == 0) return Bad("node type \"" + t.name + "\" has no Deployment");
  }
  return provider;
}

}  // namespace

absl::StatusOr<AutoscalerConfig> AutoscalerConfig::Parse(const std::string& json_text) {
  json j = ParseJson(json_text, /*ignore_comments=*/true);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  if (auto s = OnlyKnownKeys(j, "the config",
                             {"available_node_types", "max_workers", "idle_timeout_minutes", "upscaling_speed",
                              "launch_timeout_s", "update_interval_s", "provider", "cluster_name"});
      !s.ok()) {
    return s;
  }
  AutoscalerConfig config;
  if (!j.contains("available_node_types") || !j.at("available_node_types").is_object() ||
      j.at("available_node_types").empty()) {
    return Bad("\"available_node_types\" must name at least one node type");
  }
  int sum_of_max = 0;
  for (const auto& [name, t] : j.at("available_node_types").items()) {
    auto type = ParseNodeType(name, t);
    if (!type.ok()) return type.status();
    sum_of_max += type->max_workers;
    config.node_types.push_back(std::move(*type));
  }
  auto max = Count(j, "max_workers", sum_of_max, "the config");
  if (!max.ok()) return max.status();
  config.max_workers = *max;
  auto idle = NonNegativeNumber(j, "idle_timeout_minutes", 5);
  auto speed = NonNegativeNumber(j, "upscaling_speed", 1);
  auto launch = NonNegativeNumber(j, "launch_timeout_s", 300);
  auto interval = NonNegativeNumber(j, "update_interval_s", 1);
  for (const auto* v : {&idle, &speed, &launch, &interval}) {
    if (!v->ok()) return v->status();
  }
  if (*interval < 0.05 || *interval > 600) return Bad("\"update_interval_s\" must be from 0.05 to 600");
  config.idle_timeout_s = *idle * 60;
  config.upscaling_speed = *speed;
  config.launch_timeout_s = *launch;
  config.update_interval_ms = static_cast<int64_t>(*interval * 1000);
  if (!j.contains("provider")) return Bad("\"provider\" is required");
  auto provider = ParseProvider(j.at("provider"), config.node_types);
  if (!provider.ok()) return provider.status();
  config.provider = std::move(*provider);
  return config;
}

absl::StatusOr<AutoscalerConfig> AutoscalerConfig::Load(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError("autoscaler config " + path + ": " + std::string(text.status().message()));
  }
  return Parse(*text);
}

const NodeTypeConfig* AutoscalerConfig::Type(const std::string& name) const {
  for (const NodeTypeConfig& t : node_types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace manta::autoscaler
