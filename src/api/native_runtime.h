// Internal access to the native runtime's core worker, for Manta's own tests and
// tools (ownership-table and object-store leak checks). Not part of the public API.
#pragma once

#include <string>

namespace manta::core {
class CoreWorker;
}

namespace ray {
namespace internal {

// The core worker of the installed native runtime; null in local mode or before
// ray::Init(). Valid until ray::Shutdown().
manta::core::CoreWorker* GetCoreWorkerForTesting();

// The GCS address of the cluster this process is connected to; empty when not
// connected (local mode, or before ray::Init()).
std::string GetClusterAddress();

}  // namespace internal
}  // namespace ray
