// The headers most of Manta's sources parse, precompiled once (manta_common) and
// reused by every library of src/ (manta_use_pch in the top CMakeLists.txt): parsing
// gRPC, protobuf and Abseil was about half of each file's compile time.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "protos/common.pb.h"
#include "protos/gcs.pb.h"
