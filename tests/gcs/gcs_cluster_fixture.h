// GcsClusterFixture: the part of a GCS that the actor and placement group manager
// tests both stand on. An in-memory store, a real publisher (with a subscriber on
// the channels the test names) and node manager, and a raylet client pool whose
// clients are fakes, kept by address so a test can answer what they were asked.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/gcs/gcs_node_manager.h"
#include "src/gcs/gcs_publisher.h"
#include "src/gcs/in_memory_store_client.h"
#include "src/raylet/fake_raylet_client.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {

class GcsClusterFixture : public ::testing::Test {
 protected:
  explicit GcsClusterFixture(const std::vector<rpc::ChannelType>& channels)
      : store_(loop_),
        publisher_(GcsPublisher::Options(), clock_.AsFunction()),
        published_(publisher_, channels),
        nodes_(store_, publisher_, ClusterID::FromRandom(), clock_.AsFunction()),
        raylets_([this](const std::string& address) {
          auto raylet = std::make_shared<raylet::FakeRayletClient>(address);
          raylet_by_address_[address] = raylet.get();
          return raylet;
        }) {}

  // Registers a node whose raylet is at ip:port, with `resources` in total.
  NodeID RegisterNode(const std::string& ip, int port, const std::map<std::string, double>& resources = {}) {
    NodeID id = NodeID::FromRandom();
    rpc::RegisterNodeRequest request;
    rpc::NodeInfo* info = request.mutable_node_info();
    info->set_node_id(id.Binary());
    info->set_node_manager_address(ip);
    info->set_node_manager_port(port);
    for (const auto& [name, quantity] : resources) (*info->mutable_resources_total())[name] = quantity;
    rpc::RegisterNodeReply reply;
    EXPECT_THAT(CallHandler(loop_, nodes_, &GcsNodeManager::HandleRegisterNode, request, &reply), IsOk());
    return id;
  }

  // Runs the loop, its timers due "now" included (retries), until `done` holds;
  // false after about 5 s.
  bool DriveUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 5000; ++i) {
      loop_.RunUntilIdle();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  // The fake raylet at `address` (the pool made it when the code under test first
  // called that raylet).
  raylet::FakeRayletClient& Raylet(const std::string& address) { return *raylet_by_address_.at(address); }
  bool HasRaylet(const std::string& address) const { return raylet_by_address_.contains(address); }

  EventLoop loop_;
  FakeClock clock_;
  InMemoryStoreClient store_;
  GcsPublisher publisher_;
  PublishedMessages published_;
  GcsNodeManager nodes_;
  std::map<std::string, raylet::FakeRayletClient*> raylet_by_address_;
  raylet::RayletClientPool raylets_;
};

}  // namespace manta::gcs::testing
