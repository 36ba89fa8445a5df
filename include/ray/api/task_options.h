// Checks of the options a task or actor is submitted with, as Ray's public header
// of the same name declares them (Ray's own tests call CheckTaskOptions directly).
//
// ray::internal::CheckTaskOptions(resources) throws ray::internal::RayException,
// naming the resource, when a resource has an empty name, a quantity that is zero,
// negative or not finite, or a quantity above 1 that is not a whole number (2.0 is
// fine, 2.5 is not; fractions up to 1, like 0.5, are fine). ray::Task(f).Remote and
// ray::Actor(f).Remote check their resources with it before submitting.
#pragma once

#include <cmath>
#include <string>
#include <unordered_map>

#include "ray/api/ray_exception.h"

namespace ray {
namespace internal {

inline void CheckTaskOptions(const std::unordered_map<std::string, double>& resources) {
  for (const auto& [name, quantity] : resources) {
    if (name.empty()) {
      throw RayException("a resource needs a name; got an empty one with quantity " + std::to_string(quantity));
    }
    if (!std::isfinite(quantity) || quantity <= 0) {
      throw RayException("resource '" + name + "' must have a positive quantity, not " + std::to_string(quantity));
    }
    if (quantity > 1 && std::floor(quantity) != quantity) {
      throw RayException("resource '" + name + "' asks for " + std::to_string(quantity) +
                         ": above 1, a quantity must be a whole number");
    }
  }
}

}  // namespace internal
}  // namespace ray
