// What protecting the task channel costs (src/task_channel/task_channel_security.h):
// for each protection (none, mac, encrypt), the round trips per second of one push
// and its reply between an owner and a worker in this process over loopback, both
// ends busy-polling so that no thread wake-up hides the cost, with small (100 B) and
// large (64 KiB) task arguments; and the time to seal and open one frame alone.
// The figures of "none" are the baseline. Prints one JSON object.
//
//   task_channel_bench [--seconds S] [--only name,name]
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "src/common/event_loop.h"
#include "src/common/security.h"
#include "src/task_channel/task_channel.h"

namespace {

using manta::bench::Clock;
using manta::bench::Rate;
using manta::bench::Since;
using manta::core::ChannelProtection;

constexpr ChannelProtection kProtections[] = {ChannelProtection::kNone, ChannelProtection::kMac,
                                              ChannelProtection::kEncrypt};

manta::rpc::PushTaskRequest MakePush(size_t arg_bytes) {
  manta::rpc::PushTaskRequest push;
  manta::rpc::TaskSpec* spec = push.add_tasks();
  spec->set_task_id(std::string(24, 't'));
  spec->set_function_name("SmallValue");
  spec->add_args()->set_data(std::string(arg_bytes, 'a'));
  return push;
}

// Push/reply round trips per second with `protection` and `arg_bytes` of argument.
double RoundTrips(ChannelProtection protection, size_t arg_bytes, double seconds) {
  const manta::core::TaskChannelSecurity security{manta::NewClusterToken(), protection};
  auto server = manta::core::TaskChannelServer::Listen("127.0.0.1", 64 << 20, security);
  if (!server.ok()) {
    std::fprintf(stderr, "task_channel_bench: %s\n", std::string(server.status().message()).c_str());
    std::exit(1);
  }
  // The worker: answers every push with one small reply, busy-polling.
  std::thread worker([&] {
    while (auto push = (*server)->Next(/*spin_us=*/1000000)) {
      manta::rpc::PushTaskReply reply;
      reply.set_push_id(push->request->push_id());
      reply.set_done(true);
      reply.add_results()->set_task_id(push->request->tasks(0).task_id());
      std::string frames;
      manta::core::AppendFrame(manta::core::FrameKind::kReply, reply, &frames);
      (*server)->Send(push->connection, frames);
    }
  });
  manta::EventLoop loop;
  std::thread loop_thread([&] { loop.Run(); });
  auto channel = manta::core::MakeTcpTaskChannel(loop, "127.0.0.1:" + std::to_string((*server)->port()), 64 << 20,
                                                 security);
  const std::string request = MakePush(arg_bytes).SerializeAsString();
  std::atomic<bool> answered{false};
  bool failed = false;
  auto one = [&] {
    answered.store(false, std::memory_order_relaxed);
    channel->PushSerialized(request, [&](const absl::Status& status, manta::rpc::PushTaskReply&&) {
      failed |= !status.ok();
      answered.store(true, std::memory_order_release);
    });
    auto deadline = Clock::now() + std::chrono::seconds(10);
    channel->BeginSpin();  // as a thread in ray::Get does
    while (!answered.load(std::memory_order_acquire) && Clock::now() < deadline) channel->Poll();
    channel->EndSpin();
  };
  double rate = Rate(seconds, 1, one);
  channel->CancelAll();
  loop.Stop();
  loop_thread.join();
  (*server)->Wake();
  worker.join();
  if (failed) {
    std::fprintf(stderr, "task_channel_bench: a push failed\n");
    std::exit(1);
  }
  return rate;
}

// Microseconds to seal and then open one frame of `body_bytes`.
double SealAndOpenUs(ChannelProtection protection, size_t body_bytes, double seconds) {
  const std::string key = manta::SecureRandomHex(16);  // 32 bytes
  manta::core::FrameSealer sealer(protection, key);
  manta::core::FrameOpener opener(protection, key);
  const std::string body(body_bytes, 'b');
  std::string frame;
  bool ok = true;
  double per_second = Rate(seconds, 1, [&] {
    frame.clear();
    sealer.Append(1, body, &frame);
    std::string_view opened;
    ok &= opener.Open(frame.data(), frame.size(), &opened);
  });
  if (!ok) {
    std::fprintf(stderr, "task_channel_bench: a sealed frame did not open\n");
    std::exit(1);
  }
  return 1e6 / per_second;
}

}  // namespace

int main(int argc, char** argv) {
  const manta::bench::BenchFlags flags = manta::bench::BenchFlags::Parse(argc, argv);
  std::vector<std::pair<std::string, double>> results;
  for (ChannelProtection protection : kProtections) {
    const std::string name = manta::core::ChannelProtectionName(protection);
    if (flags.Want("round_trips_100B_" + name)) {
      results.emplace_back("round_trips_100B_" + name, RoundTrips(protection, 100, flags.seconds));
    }
    if (flags.Want("round_trips_64KiB_" + name)) {
      results.emplace_back("round_trips_64KiB_" + name, RoundTrips(protection, 64 << 10, flags.seconds));
    }
    if (protection == ChannelProtection::kNone) continue;
    for (size_t bytes : {size_t{200}, size_t{64} << 10}) {
      const std::string figure = "seal_and_open_" + std::string(bytes == 200 ? "200B" : "64KiB") + "_us_" + name;
      if (flags.Want(figure)) results.emplace_back(figure, SealAndOpenUs(protection, bytes, flags.seconds / 2));
    }
  }
  manta::bench::PrintJson(results);
  return 0;
}
