// Remote functions of the packaging test's consumer (registered in tasks.cc).
#pragma once

#include <string>

int Square(int x);
// The executable of the process running this task: the worker.
std::string WorkerExecutable();
// The executable of the process that started this worker: its raylet.
std::string WorkerParentExecutable();
// The value of environment variable `name` in the worker ("" when unset).
std::string EnvVar(std::string name);

// An actor: a running total.
class Total {
 public:
  static Total* Create(int start);
  explicit Total(int start) : total_(start) {}
  int Add(int x);

 private:
  int total_;
};
