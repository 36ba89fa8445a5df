// RayConfig resolution by ray::Init: command-line flags override the config, and
// RAY_ADDRESS fills an address left empty.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ray/api.h"
#include "src/api/runtime_factory.h"

namespace {

using ray::internal::ResolveRayConfig;

// argv for ResolveRayConfig, owning its strings.
class Args {
 public:
  explicit Args(std::vector<std::string> args) : args_(std::move(args)) {
    for (std::string& arg : args_) pointers_.push_back(arg.data());
  }
  int argc() const { return static_cast<int>(pointers_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

TEST(RayConfigTest, DefaultsAndStringPassword) {
  ray::RayConfig config;
  EXPECT_EQ(config.address, "");
  EXPECT_FALSE(config.local_mode);
  EXPECT_EQ(config.num_cpus, -1);
  EXPECT_EQ(config.num_gpus, -1);
  EXPECT_FALSE(config.redis_password_.has_value());
  config.redis_password_ = "secret";  // assignable from a literal
  EXPECT_EQ(*config.redis_password_, "secret");
}

TEST(RayConfigTest, FlagsOverrideTheConfig) {
  ::unsetenv("RAY_ADDRESS");
  ray::RayConfig config;
  config.address = "10.0.0.1:6379";
  config.ray_namespace = "from-config";
  Args args({"prog", "--ray_address=127.0.0.1:1234", "--ray_redis_password", "pw",
             "--ray_code_search_path=/a/lib.so::/b", "-ray_job_namespace=ns", "--ray_head_args=--x=1 --y=2",
             "--unrelated=1"});
  ray::RayConfig resolved = ResolveRayConfig(config, args.argc(), args.argv());
  EXPECT_EQ(resolved.address, "127.0.0.1:1234");
  EXPECT_EQ(resolved.redis_password_.value_or(""), "pw");
  EXPECT_EQ(resolved.code_search_path, (std::vector<std::string>{"/a/lib.so", "/b"}));
  EXPECT_EQ(resolved.ray_namespace, "ns");
  EXPECT_EQ(resolved.head_args, (std::vector<std::string>{"--x=1", "--y=2"}));
  // No flags: the config as given.
  EXPECT_EQ(ResolveRayConfig(config, 0, nullptr).address, "10.0.0.1:6379");
}

TEST(RayConfigTest, RayAddressFillsAnEmptyAddress) {
  ::setenv("RAY_ADDRESS", "192.168.1.1:6379", 1);
  ray::RayConfig config;
  EXPECT_EQ(ResolveRayConfig(config, 0, nullptr).address, "192.168.1.1:6379");
  config.address = "explicit:1";
  EXPECT_EQ(ResolveRayConfig(config, 0, nullptr).address, "explicit:1");
  ::unsetenv("RAY_ADDRESS");
  EXPECT_EQ(ResolveRayConfig(ray::RayConfig(), 0, nullptr).address, "");
}

}  // namespace

namespace {

// GoogleTest's InitGoogleTest removes its flags from argv and ends it with a NULL
// entry; a program that kept the original argc (as Ray's own C++ tests do) passes
// both to ray::Init. The flags before the NULL still count, nothing after is read.
TEST(RayConfigTest, AnArgvShortenedByANullEntryIsReadUpToIt) {
  Args args({"prog", "--ray_job_namespace", "ns1"});
  args.argv()[2] = nullptr;  // "--ray_job_namespace" now has no value
  ray::RayConfig config;
  EXPECT_EQ(ResolveRayConfig(config, args.argc(), args.argv()).ray_namespace, "");
  Args with_value({"prog", "--ray_job_namespace=ns2", "x"});
  with_value.argv()[2] = nullptr;
  EXPECT_EQ(ResolveRayConfig(config, with_value.argc(), with_value.argv()).ray_namespace, "ns2");
}

}  // namespace
