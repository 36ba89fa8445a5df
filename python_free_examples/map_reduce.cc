// Map-reduce: count the words of a text with tasks.
//
// Map: one CountWords task per chunk (here, one line) returns that chunk's counts.
// Reduce: Merge tasks add counts up pairwise, in a tree. Merge takes the map tasks'
// ObjectRefs, not their values: each Merge starts as soon as its two inputs are
// ready, and the counts travel between workers, never through the driver, which
// only fetches the final result.
//
// As in every Manta program, the raylet starts workers by running this same binary;
// in a worker ray::Init() serves tasks and never returns, so main() does nothing
// before it that a worker should not do.
#include <ray/api.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using Counts = std::map<std::string, int>;

// Map: the words of one chunk of text, lower-cased, without punctuation.
Counts CountWords(std::string chunk) {
  Counts counts;
  std::string word;
  std::istringstream words(chunk);
  while (words >> word) {
    std::string clean;
    for (char c : word) {
      if (std::isalpha(static_cast<unsigned char>(c))) clean += static_cast<char>(std::tolower(c));
    }
    if (!clean.empty()) ++counts[clean];
  }
  return counts;
}

// Reduce: the sum of two partial counts.
Counts Merge(Counts a, Counts b) {
  for (const auto& [word, n] : b) a[word] += n;
  return a;
}

// Every function a task runs is registered by name, for the workers to find.
RAY_REMOTE(CountWords, Merge);

const std::vector<std::string> kText = {
    "It was the best of times, it was the worst of times,",
    "it was the age of wisdom, it was the age of foolishness,",
    "it was the epoch of belief, it was the epoch of incredulity,",
    "it was the season of Light, it was the season of Darkness,",
    "it was the spring of hope, it was the winter of despair.",
};

int main(int argc, char** argv) {
  ray::RayConfig config;
  ray::Init(config, argc, argv);  // in a worker: serves tasks, never returns

  // Map: submit every chunk at once; each Remote returns a pending ObjectRef.
  std::vector<ray::ObjectRef<Counts>> partial;
  for (const std::string& line : kText) partial.push_back(ray::Task(CountWords).Remote(line));

  // Reduce: merge neighbours until one ref is left. Nothing here waits: the driver
  // only builds the graph of tasks; the cluster runs each task when its inputs are ready.
  while (partial.size() > 1) {
    std::vector<ray::ObjectRef<Counts>> next;
    for (size_t i = 0; i + 1 < partial.size(); i += 2) {
      next.push_back(ray::Task(Merge).Remote(partial[i], partial[i + 1]));
    }
    if (partial.size() % 2 == 1) next.push_back(partial.back());
    partial = std::move(next);
  }
  Counts counts = *ray::Get(partial[0]);  // the one blocking call

  // The five most frequent words.
  std::vector<std::pair<std::string, int>> top(counts.begin(), counts.end());
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < std::min<size_t>(5, top.size()); ++i) {
    std::cout << top[i].first << ": " << top[i].second << std::endl;
  }

  // Check against the same count done here, without tasks.
  Counts expected;
  for (const std::string& line : kText) expected = Merge(expected, CountWords(line));
  int total = 0;
  for (const auto& [word, n] : counts) total += n;
  bool ok = counts == expected;
  std::cout << total << " words, " << counts.size() << " distinct: "
            << (ok ? "matches a local count" : "DIFFERS from a local count") << std::endl;

  ray::Shutdown();
  return ok ? 0 : 1;
}
