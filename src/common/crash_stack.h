// Stack traces for a process that dies of a fatal signal.
#pragma once

namespace manta {

// Once per process: when the process dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT,
// prints the signal and a symbolized stack trace of the thread that got
// it to stderr, then dies of the same signal. A signal the program already handles
// (its handler is not the default) is left alone, and SIGTERM is never taken: a
// driver stopped by its job keeps its own behaviour. For drivers (ray::Init); the
// daemons and workers have glog's handler (logging.h).
void InstallCrashStackTraces();

}  // namespace manta
