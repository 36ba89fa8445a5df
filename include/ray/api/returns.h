// ray::Returns<T>: several return values from one task, each its own object (a Manta
// extension; Ray's Python API calls it num_returns).
//
//   ray::Returns<Bucket> Partition(int map_index, int buckets) {
//     ray::Returns<Bucket> out(buckets);
//     for (const Record& r : Generate(map_index)) out[BucketOf(r, buckets)].push_back(r);
//     return out;
//   }
//   RAY_REMOTE(Partition);
//
//   std::vector<ray::ObjectRef<Bucket>> parts =
//       ray::Task(Partition).SetNumReturns(12).Remote(0, 12);
//   Bucket third = *ray::Get(parts[2]);
//
// A task whose function returns ray::Returns<T> must be given its number of returns
// n >= 1 with SetNumReturns(n) before Remote (Remote throws RayException otherwise);
// Remote then returns n ObjectRef<T>, one per value, in order. Returns<T> is a
// std::vector<T>: build it as one. Each value is stored as its own object, owned by
// the caller like any task's return: it is freed when the caller's (and borrowers')
// refs to it are gone, and rebuilt by running the task again when the node holding
// it dies (unlike a ray::Put inside the task, which the task's worker owns). A task
// that returns a number of values other than n fails: every one of its refs throws
// RayTaskException naming both numbers. When the task fails, every ref throws its
// error. SetNumReturns exists only for such functions (a compile error elsewhere),
// and actor methods cannot return ray::Returns<T> yet.
#pragma once

#include <type_traits>
#include <vector>

namespace ray {

template <typename T>
class ObjectRef;

template <typename T>
class Returns : public std::vector<T> {
  static_assert(!std::is_same_v<T, bool>, "ray::Returns<bool>: use ray::Returns<char> or a struct");

 public:
  using std::vector<T>::vector;
  Returns() = default;
  Returns(std::vector<T> values) : std::vector<T>(std::move(values)) {}  // NOLINT: implicit on purpose
};

namespace internal {

template <typename R>
struct IsReturns : std::false_type {};
template <typename T>
struct IsReturns<Returns<T>> : std::true_type {
  using ValueType = T;
};

// What Remote returns for a function returning R: ObjectRef<R>, or one ObjectRef<T>
// per value for ray::Returns<T>.
template <typename R>
struct RemoteResult {
  using Type = ObjectRef<R>;
};
template <typename T>
struct RemoteResult<Returns<T>> {
  using Type = std::vector<ObjectRef<T>>;
};

}  // namespace internal
}  // namespace ray
