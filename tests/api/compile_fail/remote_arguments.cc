// Compiled by check_compile_fails.cmake twice: with CASE_OK it must compile; with
// CASE_ERRORS every function below must fail with the API's static_assert message,
// and nothing else may fail (one compile for all cases keeps the test fast).
#include <string>
#include <vector>

#include "ray/api.h"

int Plus(int a, int b) { return a + b; }
int TakesRef(ray::ObjectRef<int> ref) { return 0; }
ray::Returns<int> Several(int n) { return ray::Returns<int>(n, 1); }
RAY_REMOTE(Plus, TakesRef, Several);

class Counter {
 public:
  static Counter* Create(int start) { return new Counter(); }
  int Add(int x) { return x; }
  int Get() const { return 0; }
};
class Other {
 public:
  int Add(int x) { return x; }
};
RAY_REMOTE(Counter::Create, &Counter::Add, &Counter::Get);

ray::ObjectRef<int> int_ref;
ray::ObjectRef<std::string> string_ref;
ray::ObjectRef<std::vector<uint8_t>> bytes_ref;
ray::ActorHandle<Counter> counter;

#if defined(CASE_OK)
void Valid() {
  ray::Task(Plus).Remote(1, 2L);
  ray::Task(Plus).Remote(int_ref, static_cast<short>(2));
  ray::Task(TakesRef).Remote(int_ref);
  ray::Actor(Counter::Create).Remote(int_ref);
  counter.Task(&Counter::Add).Remote(1L);
  counter.Task(&Counter::Get).Remote();
  std::vector<ray::ObjectRef<int>> several = ray::Task(Several).SetNumReturns(3).Remote(3);
  ray::ObjectView<uint8_t> view = ray::GetView(bytes_ref);
  ray::ObjectView<char> text = ray::GetView(string_ref);
}
#elif defined(CASE_ERRORS)
// "wrong number of arguments" x2
void TooFew() { ray::Task(Plus).Remote(1); }
void TooMany() { ray::Task(Plus).Remote(1, 2, 3); }
// "an argument does not match" x3
void WrongType() { ray::Task(Plus).Remote(std::string("one"), 2); }
void WrongRefType() { ray::Task(Plus).Remote(string_ref, 2); }
void ValueForRefParameter() { ray::Task(TakesRef).Remote(5); }
// "f must be a free function" x1
void Lambda() { ray::Task([](int a) { return a; }).Remote(1); }
// Actors: "wrong number of arguments" x2, "does not match" x2
void MethodTooFew() { counter.Task(&Counter::Add).Remote(); }
void FactoryTooMany() { ray::Actor(Counter::Create).Remote(1, 2); }
// (other types than above: the compiler reports each instantiation once)
void MethodWrongType() { counter.Task(&Counter::Add).Remote(std::vector<int>()); }
void FactoryWrongType() { ray::Actor(Counter::Create).Remote(nullptr); }
// "C must be T" x1, "returning a pointer to the actor's class" x1
void MethodOfAnotherClass() { counter.Task(&Other::Add); }
void FactoryNotReturningAPointer() { ray::Actor(Plus); }
// "ref must be an ObjectRef of std::vector<uint8_t>" x1
void ViewOfInts() { ray::GetView(int_ref); }
// "an actor method cannot return ray::Returns" x1
class Splitter {
 public:
  ray::Returns<int> Split(int n) { return {}; }
};
RAY_REMOTE(&Splitter::Split);
#else
#error "define CASE_OK or CASE_ERRORS"
#endif
