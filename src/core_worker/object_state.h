// The rows of `manta list objects` / `manta memory` (ARCHITECTURE.md §18) for the
// objects one process owns: the owner knows each object's size, status, who holds
// references to it and where its copies are. The GCS asks every live driver and
// worker (CoreWorkerService.ListObjects) and merges their answers.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "protos/core_worker.pb.h"
#include "src/core_worker/reference_counter.h"

namespace manta::core {

// Who answers: the owner of every row.
struct ObjectOwner {
  Address address;
  int32_t pid = 0;
  bool is_driver = false;
};

// The reference kind that keeps an owned object alive, as Ray names them:
// LOCAL_REFERENCE (a handle in the owner), USED_BY_PENDING_TASK (an argument of a task
// not yet finished), CAPTURED_IN_OBJECT (inside another object), BORROWED (only other
// processes hold it).
const char* ReferenceTypeOf(const ReferenceCounter::OwnedObject& object);

// Fills `reply` with the objects that pass the request's filters: the largest first,
// at most the request's limit; the summary covers every match. InvalidArgument for
// an unknown filter field or predicate, or a limit out of 1..10000.
absl::Status ListOwnedObjects(std::vector<ReferenceCounter::OwnedObject> objects, const ObjectOwner& owner,
                              const rpc::ListObjectsRequest& request, rpc::ListObjectsReply* reply);

}  // namespace manta::core
