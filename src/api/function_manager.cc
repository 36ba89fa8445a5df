#include "ray/api/function_manager.h"

#include "ray/api/task_caller.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ray {
namespace internal {
namespace {

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Drops whitespace, keeping one space where it separates two identifier characters
// ("unsigned int", "const Foo&"): "RAY_FUNC(f, const Foo &)" -> "RAY_FUNC(f,const Foo&)".
std::string NormalizeSpelling(const std::string& text) {
  std::string out;
  bool pending_space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      pending_space = true;
      continue;
    }
    if (pending_space && !out.empty() && IsIdentifierChar(out.back()) && IsIdentifierChar(c)) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

// Splits at commas outside parentheses and angle brackets.
std::vector<std::string> SplitTopLevel(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(' || c == '<' || c == '[') ++depth;
    if (c == ')' || c == '>' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  parts.push_back(current);
  return parts;
}

// "RAY_FUNC(f,A,B)" -> "f(A,B)"; anything else unchanged.
std::string RewriteRayFunc(const std::string& name) {
  static const std::string kPrefix = "RAY_FUNC(";
  if (name.rfind(kPrefix, 0) != 0 || name.back() != ')') return name;
  std::string inner = name.substr(kPrefix.size(), name.size() - kPrefix.size() - 1);
  std::vector<std::string> parts = SplitTopLevel(inner);
  std::string out = parts[0] + "(";
  for (size_t i = 1; i < parts.size(); ++i) out += (i > 1 ? "," : "") + parts[i];
  return out + ")";
}

std::string DemangleSymbol(const char* symbol) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) return symbol;
  std::string name(demangled);
  std::free(demangled);
  return name;
}

}  // namespace

FunctionManager& FunctionManager::Instance() {
  // Never destroyed: registrations and lookups may happen during static
  // initialization and destruction of other objects.
  static FunctionManager* const instance = new FunctionManager();
  return *instance;
}

void FunctionManager::RegisterFunction(const std::string& name, FunctionKey key, RemoteFunction invoker) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    if (it->second->key == key) return;
    std::ostringstream message;
    message << "the name \"" << name << "\" is registered for two different functions (at " << std::hex
            << it->second->key << " and " << key
            << "). Overloads need RAY_FUNC(f, parameter types...); two functions spelled the same "
               "(e.g. static functions in different files) need different names.";
    AbortRemoteRegistration(name.c_str(), message.str());
  }
  by_name_.emplace(name, std::make_unique<Entry>(Entry{key, std::move(invoker)}));
  name_by_key_.emplace(key, name);  // keeps the first name of a function
}

const RemoteFunction* FunctionManager::GetFunction(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second->invoker;
}

std::string FunctionManager::GetFunctionName(FunctionKey key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = name_by_key_.find(key);
  return it == name_by_key_.end() ? std::string() : it->second;
}

void FunctionManager::RegisterActorFactory(const std::string& name, FunctionKey key, ActorFactory factory,
                                           std::type_index actor_class) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = factories_.find(name);
  if (it != factories_.end()) {
    if (it->second->key == key) return;
    AbortRemoteRegistration(name.c_str(), "the name \"" + name +
                                              "\" is registered for two different actor factories; overloads need "
                                              "RAY_FUNC(f, parameter types...)");
  }
  factories_.emplace(name, std::make_unique<FactoryEntry>(FactoryEntry{key, std::move(factory), actor_class}));
  name_by_key_.emplace(key, name);
}

const ActorFactory* FunctionManager::GetActorFactory(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = factories_.find(name);
  return it == factories_.end() ? nullptr : &it->second->factory;
}

void FunctionManager::RegisterActorMethod(const std::string& name, const std::string& key, ActorMethod method,
                                          std::type_index actor_class, ActorCoroutineMethod coroutine,
                                          bool makes_async) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = methods_.find(name);
  if (it != methods_.end()) {
    if (it->second->key == key) return;
    AbortRemoteRegistration(name.c_str(), "the name \"" + name +
                                              "\" is registered for two different member functions (overloaded "
                                              "methods cannot be actor methods)");
  }
  if (coroutine && makes_async) async_classes_.insert(actor_class);
  methods_.emplace(name, std::make_unique<MethodEntry>(MethodEntry{key, std::move(method), std::move(coroutine)}));
  method_name_by_key_.emplace(key, name);
}

const ActorMethod* FunctionManager::GetActorMethod(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = methods_.find(name);
  return it == methods_.end() ? nullptr : &it->second->method;
}

const ActorCoroutineMethod* FunctionManager::GetActorCoroutineMethod(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = methods_.find(name);
  return it == methods_.end() || !it->second->coroutine ? nullptr : &it->second->coroutine;
}

bool FunctionManager::IsAsyncActorClass(std::type_index actor_class) const {
  std::lock_guard<std::mutex> lock(mu_);
  return async_classes_.contains(actor_class);
}

bool FunctionManager::IsAsyncActorFactory(const std::string& factory_name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = factories_.find(factory_name);
  return it != factories_.end() && async_classes_.contains(it->second->actor_class);
}

std::string FunctionManager::GetActorMethodName(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = method_name_by_key_.find(key);
  return it == method_name_by_key_.end() ? std::string() : it->second;
}

std::vector<std::string> FunctionManager::GetRegisteredNames() const {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, entry] : by_name_) names.push_back(name);
    for (const auto& [name, entry] : factories_) names.push_back(name);
    for (const auto& [name, entry] : methods_) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string FunctionManager::NotRegisteredMessage(FunctionKey key) {
  std::string function;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(key), &info) != 0 && info.dli_sname != nullptr &&
      info.dli_saddr == reinterpret_cast<void*>(key)) {
    function = DemangleSymbol(info.dli_sname);
  } else {
    std::ostringstream address;
    address << "at address 0x" << std::hex << key;
    function = address.str();
  }
  return "ray::Task(f).Remote(): the function " + function +
         " is not registered as a remote function; register it with RAY_REMOTE(f) at namespace "
         "scope in a .cc file linked into this program";
}

std::vector<std::string> SplitRemoteFunctionNames(const char* text) {
  std::vector<std::string> names;
  for (const std::string& part : SplitTopLevel(text)) {
    std::string name = RewriteRayFunc(NormalizeSpelling(part));
    if (name.empty()) return {};
    names.push_back(std::move(name));
  }
  return names;
}

void AbortRemoteRegistration(const char* text, const std::string& message) {
  std::fprintf(stderr, "RAY_REMOTE(%s): %s\n", text, message.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string ArgumentContext(const std::string& function_name, size_t index) {
  return function_name + ": argument #" + std::to_string(index + 1);
}

void ThrowArgumentCount(const std::string& function_name, size_t expected, size_t actual) {
  throw RayException(function_name + " takes " + std::to_string(expected) + " argument(s) but the task carries " +
                     std::to_string(actual));
}

void ThrowNilArgument(const std::string& function_name, size_t position) {
  throw RayException("ray::Task(" + function_name + ").Remote(): argument #" + std::to_string(position) +
                     " is a nil ObjectRef (default-constructed or moved from)");
}

void CheckNumReturns(const std::string& function_name, bool set, int num_returns) {
  constexpr int kMaxReturns = 1 << 20;
  if (!set) {
    throw RayException("ray::Task(" + function_name + ").Remote(): " + function_name +
                       " returns ray::Returns<T>: say how many values with SetNumReturns(n) first");
  }
  if (num_returns < 1 || num_returns > kMaxReturns) {
    throw RayException("ray::Task(" + function_name + ").SetNumReturns(" + std::to_string(num_returns) +
                       "): the number of returns must be between 1 and " + std::to_string(kMaxReturns));
  }
}

}  // namespace internal
}  // namespace ray
