// RayConfig::code_search_path: tasks run in the generic manta_worker, which loads
// the task library from the path; the driver is not started as a worker. Links the
// shared libmanta (as an installed program would), not the static libraries.
#include <ray/api.h>

#include <string>

#include "gtest/gtest.h"

int Triple(int x);
std::string WorkerExecutable();

namespace {

TEST(CodeSearchPathTest, TasksRunInMantaWorkerFromTheLibrary) {
  ray::RayConfig config;
  config.code_search_path = {MANTA_TASK_LIBRARY_DIR};
  config.head_args = {"--num-cpus=1", "--object-store-memory=134217728"};
  ray::Init(config);
  EXPECT_EQ(*ray::Task(Triple).Remote(14).Get(), 42);
  std::string exe = *ray::Task(WorkerExecutable).Remote().Get();
  EXPECT_NE(exe.find("manta_worker"), std::string::npos) << exe;
  ray::Shutdown();
}

}  // namespace
