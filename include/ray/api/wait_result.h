// ray::WaitResult<T>: what ray::Wait returns.
//
// `ready` holds the refs whose objects were ready (a value or an error) when Wait
// returned, `unready` the others; both keep the order of the list given to Wait.
// A plain value type, safe to move between threads.
#pragma once

#include <list>
#include <utility>

#include "ray/api/object_ref.h"

namespace ray {

template <typename T>
class WaitResult {
 public:
  WaitResult() = default;
  WaitResult(std::list<ObjectRef<T>>&& ready_objects, std::list<ObjectRef<T>>&& unready_objects)
      : ready(std::move(ready_objects)), unready(std::move(unready_objects)) {}

  std::list<ObjectRef<T>> ready;
  std::list<ObjectRef<T>> unready;
};

}  // namespace ray
