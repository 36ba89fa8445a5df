// The benchmarks that drive a cluster through the API are one program
// (manta_api_benches; build/bench/task_bench and the others are links to it): they
// share the compile of the API's templates. Each bench file registers its main
// under its name; the program runs the one its command name (argv[0]) says.
#pragma once

namespace manta::bench {

using BenchMain = int (*)(int argc, char** argv);

// Registers `main` as the program `name` (at static initialization); returns true.
bool AddBenchMain(const char* name, BenchMain main);

}  // namespace manta::bench
