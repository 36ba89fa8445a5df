// Helpers shared by the randomized tests of the task channel (task_frame_fuzz_test.cc,
// task_frame_handshake_fuzz_test.cc): the frame format of task_channel.h written down
// independently of FrameReader, to compare what it decodes against, and random pushes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "src/task_channel/task_channel.h"
#include "src/task_channel/task_channel_internal.h"
#include "tests/fuzz/fuzz_util.h"

namespace manta::core {

// One frame: its kind byte and its body.
struct Frame {
  uint8_t kind = 0;
  std::string body;
  bool operator==(const Frame& o) const { return kind == o.kind && body == o.body; }
};

// The frame format of task_channel.h applied to a whole byte string: [u32 LE length
// of kind + body][u8 kind][body]. The first frame may be at most `first_limit` bytes
// long, the later ones `rest_limit` (the reader's limit rises once the handshake is
// done). Stops at the first malformed header (length 0, or above the limit + 1) or
// where the bytes run out.
struct Parsed {
  std::vector<Frame> frames;
  bool malformed = false;
};
inline Parsed ParseFrames(std::string_view bytes, int64_t first_limit, int64_t rest_limit) {
  Parsed out;
  size_t pos = 0;
  while (bytes.size() - pos >= 4) {
    const int64_t limit = out.frames.empty() ? first_limit : rest_limit;
    const uint32_t length = task_channel_internal::LoadLe32(bytes.data() + pos);
    if (length == 0 || static_cast<int64_t>(length) > limit + 1) {
      out.malformed = true;
      break;
    }
    if (bytes.size() - pos - 4 < length) break;
    out.frames.push_back({static_cast<uint8_t>(bytes[pos + 4]), std::string(bytes.substr(pos + 5, length - 1))});
    pos += 4 + length;
  }
  return out;
}

// A push with random ids, up to three tasks, and now and then an argument of up to
// `max_arg_bytes` random bytes.
inline rpc::PushTaskRequest RandomPush(std::mt19937_64& rng, size_t max_arg_bytes) {
  rpc::PushTaskRequest push;
  push.set_intended_worker_id(fuzz::RandomBytes(rng, 28));
  push.set_push_id(rng());
  const int tasks = static_cast<int>(fuzz::Uniform(rng, 0, 3));
  for (int i = 0; i < tasks; ++i) {
    rpc::TaskSpec* spec = push.add_tasks();
    spec->set_task_id(fuzz::RandomBytes(rng, 24));
    spec->set_function_name("f" + std::to_string(rng() % 1000));
    spec->set_num_returns(static_cast<int32_t>(fuzz::Uniform(rng, 0, 3)));
    if (fuzz::OneIn(rng, 2)) spec->add_args()->set_data(fuzz::RandomBytes(rng, max_arg_bytes));
  }
  return push;
}

}  // namespace manta::core
