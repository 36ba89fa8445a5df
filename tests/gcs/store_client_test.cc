// The StoreClientInterface contract (store_client_test_suite.h) over
// InMemoryStoreClient. The same suite runs over Redis in redis_store_client_test.cc.
#include <memory>

#include "src/gcs/in_memory_store_client.h"
#include "tests/gcs/store_client_test_suite.h"

namespace manta::gcs::testing {
namespace {

struct InMemoryBackend {
  std::unique_ptr<StoreClientInterface> Make(EventLoop& loop) {
    return std::make_unique<InMemoryStoreClient>(loop);
  }
};

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, StoreClientTest, InMemoryBackend);

}  // namespace manta::gcs::testing
