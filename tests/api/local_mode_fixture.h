// LocalModeFixture: runs each test against a fresh local-mode runtime (ray::Init with
// RayConfig::local_mode) and shuts it down after the test.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "ray/api.h"
#include "src/api/local_mode_runtime.h"

namespace manta::testing {

class LocalModeFixture : public ::testing::Test {
 protected:
  // `ray_namespace`: the job's namespace (empty: an anonymous one); `num_cpus`: the
  // pool size (-1: the default).
  explicit LocalModeFixture(std::string ray_namespace = "", int num_cpus = -1)
      : ray_namespace_(std::move(ray_namespace)), num_cpus_(num_cpus) {}

  void SetUp() override {
    ray::RayConfig config;
    config.local_mode = true;
    config.ray_namespace = ray_namespace_;
    config.num_cpus = num_cpus_;
    ray::Init(config);
  }
  void TearDown() override { ray::Shutdown(); }

  // The installed runtime, for its test accessors.
  static ray::internal::LocalModeRuntime& Runtime() {
    auto* runtime = dynamic_cast<ray::internal::LocalModeRuntime*>(ray::internal::GetRayRuntime());
    EXPECT_NE(runtime, nullptr);
    return *runtime;
  }

 private:
  const std::string ray_namespace_;
  const int num_cpus_;
};

}  // namespace manta::testing
