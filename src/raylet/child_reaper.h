// ChildReaper: reaps the raylet's exited child processes (its workers) when SIGCHLD
// arrives, and hands each (pid, wait status) to a callback.
//
// Uses an asio signal_set on the loop's io_context; each SIGCHLD drains every exited
// child with waitpid(-1, WNOHANG), since signals coalesce. Nothing else in the
// process may rely on waiting for its own children by pid after they are reaped here.
// Loop thread only; the callback runs on the loop. `loop` outlives this.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>

#include "src/common/event_loop.h"

namespace manta::raylet {

class ChildReaper {
 public:
  ChildReaper(EventLoop& loop, std::function<void(pid_t pid, int status)> on_exit);
  ~ChildReaper();
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

  // Installs the SIGCHLD handler and reaps children that exited before it.
  void Start();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::raylet
