// The packaging test's driver: runs one task and reports which executables ran it.
// With --ray_code_search_path=<libconsumer_tasks.so> its workers are the installed
// manta_worker; without, they are this program.
#include <ray/api.h>

#include <iostream>
#include <map>
#include <string>

#include "tasks.h"

int main(int argc, char** argv) {
  ray::RayConfig config;
  ray::Init(config, argc, argv);
  std::cout << "Square(7) = " << *ray::Task(Square).Remote(7).Get() << std::endl;
  std::cout << "worker: " << *ray::Task(WorkerExecutable).Remote().Get() << std::endl;
  std::cout << "raylet: " << *ray::Task(WorkerParentExecutable).Remote().Get() << std::endl;
  ray::RuntimeEnv env;  // needs nlohmann-json, found through find_package(Manta)
  env.Set<std::map<std::string, std::string>>("env_vars", {{"CONSUMER_VAR", "from-env"}});
  std::cout << "env var: " << *ray::Task(EnvVar).SetRuntimeEnv(env).Remote("CONSUMER_VAR").Get() << std::endl;
  ray::ActorHandle<Total> total = ray::Actor(Total::Create).Remote(10);
  total.Task(&Total::Add).Remote(5);
  std::cout << "actor total: " << *total.Task(&Total::Add).Remote(7).Get() << std::endl;
  ray::Shutdown();
  return 0;
}
