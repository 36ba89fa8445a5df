#include "src/raylet/child_reaper.h"

#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

namespace manta::raylet {

struct ChildReaper::Impl {
  Impl(EventLoop& loop, std::function<void(pid_t, int)> fn)
      : signals(*static_cast<boost::asio::io_context*>(loop.native_handle())), on_exit(std::move(fn)) {}

  void Reap() {
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) on_exit(pid, status);
  }

  void Wait() {
    signals.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;  // cancelled: the reaper is going away
      Reap();
      Wait();
    });
  }

  boost::asio::signal_set signals;
  std::function<void(pid_t, int)> on_exit;
};

ChildReaper::ChildReaper(EventLoop& loop, std::function<void(pid_t pid, int status)> on_exit)
    : impl_(std::make_unique<Impl>(loop, std::move(on_exit))) {}

ChildReaper::~ChildReaper() {
  boost::system::error_code ignored;
  impl_->signals.cancel(ignored);
}

void ChildReaper::Start() {
  impl_->signals.add(SIGCHLD);
  impl_->Wait();
  impl_->Reap();
}

}  // namespace manta::raylet
