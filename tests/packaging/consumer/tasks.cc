#include "tasks.h"

#include <ray/api.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

int Square(int x) { return x * x; }

std::string WorkerExecutable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::string WorkerParentExecutable() {
  return std::filesystem::read_symlink("/proc/" + std::to_string(getppid()) + "/exe").string();
}

std::string EnvVar(std::string name) {
  const char* value = std::getenv(name.c_str());
  return value == nullptr ? "" : value;
}

Total* Total::Create(int start) { return new Total(start); }
int Total::Add(int x) { return total_ += x; }

RAY_REMOTE(Square, WorkerExecutable, WorkerParentExecutable, EnvVar, Total::Create, &Total::Add);
