// Remote functions of the packaging test's consumer (registered in tasks.cc).
#pragma once

#include <string>

int Square(int x);
// The executable of the process running this task: the worker.
std::string WorkerExecutable();
// The executable of the process that started this worker: its raylet.
std::string WorkerParentExecutable();
