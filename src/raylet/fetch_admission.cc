#include "src/raylet/fetch_admission.h"

#include <utility>

namespace manta::raylet {

FetchAdmission::FetchAdmission(EventLoop& loop, std::function<int64_t()> room, int64_t poll_ms)
    : loop_(loop), room_(std::move(room)), poll_ms_(poll_ms) {}

FetchAdmission::~FetchAdmission() { *alive_ = false; }

void FetchAdmission::Add(int64_t bytes, Start start) {
  waiting_.push_back(Waiting{std::max<int64_t>(bytes, 0), std::move(start)});
  Admit();
}

void FetchAdmission::Admit() {
  // A fetch done at once (its objects here already) calls back into Admit from
  // start(): the loop below goes on instead.
  if (admitting_) return;
  admitting_ = true;
  while (!waiting_.empty()) {
    Waiting& head = waiting_.front();
    // What is pulled for the fetches started counts in the store's use once created;
    // counting their whole size too errs on the side of waiting.
    if (active_ > 0 && active_bytes_ + head.bytes > room_()) break;
    Waiting admitted = std::move(head);
    waiting_.pop_front();
    ++active_;
    active_bytes_ += admitted.bytes;
    admitted.start([this, alive = alive_, bytes = admitted.bytes, called = false]() mutable {
      if (!*alive || called) return;
      called = true;
      --active_;
      active_bytes_ -= bytes;
      Admit();
    });
  }
  admitting_ = false;
  if (waiting_.empty()) {
    poll_timer_.reset();
  } else if (poll_timer_ == nullptr) {
    poll_timer_ = loop_.RunEvery("FetchAdmission.Poll", poll_ms_, [this] { Admit(); });
  }
}

}  // namespace manta::raylet
