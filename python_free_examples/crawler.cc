// A crawler that streams, awaits and cancels: Manta's futures beyond Ray's C++ API.
//
// Discover, a streaming task (ray::Generator), yields the URLs of a made-up site as it
// finds them. The driver, a coroutine, starts a Fetch task for each URL as soon as it
// arrives (co_await on the ray::ObjectRefGenerator), then waits without a thread for
// most of the fetches (ray::WaitAsync) and cancels the stragglers (ray::Cancel): a
// Fetch of a slow page keeps checking ray::IsCancelled() and stops when told.
//
// As in every Manta program, the raylet starts workers by running this same binary;
// in a worker ray::Init() serves tasks and never returns.
#include <ray/api.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* kSite = "https://site.example/page/";

int PageNumber(const std::string& url) { return std::stoi(url.substr(std::string(kSite).size())); }
// One page in ten answers slowly: its fetch would take a minute.
bool IsSlow(int page) { return page % 10 == 7; }

}  // namespace

// Yields the site's URLs one by one, as a crawl of its index would find them.
ray::Generator<std::string> Discover(int pages) {
  for (int page = 0; page < pages; ++page) co_yield kSite + std::to_string(page);
}

// The size of a page (made up from its URL). A slow page is waited for until the
// fetch is cancelled (or a minute passes).
int64_t Fetch(std::string url) {
  const int page = PageNumber(url);
  if (IsSlow(page)) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!ray::IsCancelled() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return -1;  // never seen by anyone: a cancelled task's result is the cancelled error
  }
  return 1000 + 10 * page;
}

RAY_REMOTE(Discover, Fetch);

struct Report {
  int fetched = 0;
  int64_t bytes = 0;
  int cancelled = 0;
};

ray::Coroutine<Report> Crawl(int pages) {
  // Fetches start while Discover still runs: each URL is an object as soon as it is yielded.
  ray::ObjectRefGenerator<std::string> urls = ray::Task(Discover).Remote(pages);
  std::vector<ray::ObjectRef<int64_t>> fetches;
  while (std::optional<ray::ObjectRef<std::string>> url = co_await urls.NextAsync()) {
    std::shared_ptr<std::string> address = co_await *url;
    // A quarter of a CPU each: slow fetches do not hold up the others.
    fetches.push_back(ray::Task(Fetch).SetResource("CPU", 0.25).Remote(*address));
  }

  // Wait for nine in ten, then cancel the rest.
  const int wanted = static_cast<int>(fetches.size()) - static_cast<int>(fetches.size()) / 10;
  ray::WaitResult<int64_t> done = co_await ray::WaitAsync(fetches, wanted);
  Report report;
  for (const ray::ObjectRef<int64_t>& fetch : done.ready) {
    report.bytes += *co_await fetch;
    ++report.fetched;
  }
  for (const ray::ObjectRef<int64_t>& straggler : done.unready) ray::Cancel(straggler);
  for (const ray::ObjectRef<int64_t>& straggler : done.unready) {
    try {
      co_await straggler;
    } catch (const ray::internal::RayTaskCancelledException&) {
      ++report.cancelled;
    }
  }
  co_return report;
}

int main(int argc, char** argv) {
  ray::RayConfig config;
  ray::Init(config, argc, argv);  // in a worker: serves tasks, never returns

  constexpr int kPages = 50;
  Report report = ray::RunAsync(Crawl(kPages));  // the crawl, and its awaits, on this thread

  int slow = 0;
  int64_t expected_bytes = 0;
  for (int page = 0; page < kPages; ++page) {
    if (IsSlow(page)) {
      ++slow;
    } else {
      expected_bytes += 1000 + 10 * page;
    }
  }
  const bool right = report.fetched == kPages - slow && report.bytes == expected_bytes && report.cancelled == slow;
  std::cout << "crawled " << report.fetched << " pages (" << report.bytes << " bytes), cancelled "
            << report.cancelled << " slow ones: " << (right ? "as expected" : "WRONG") << std::endl;
  ray::Shutdown();
  return right ? 0 : 1;
}
