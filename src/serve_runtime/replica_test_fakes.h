// In-memory ReplicaRuntime and ReplicaSetSource for the routers' and the proxy's tests.
//
// FakeReplicaRuntime answers probes (get_num_ongoing_requests) with the queue lengths or errors
// the test sets, other calls with the answers the test sets (or holds them back), records every
// call, and keeps each streaming call for the test to drive
// (Item, End) or drives it with a responder the test installs. As the interface requires, every
// callback runs on the fake's own thread (one, in the order they were posted), never inside the
// call that gave it.
//
// FakeReplicaSetSource holds one replica set per (application, deployment) and one route table;
// its long polls block until what they watch changes or Close (they ignore `wait`, so a test
// never waits on time), and it records what is reported.
//
// FakeProxyRuntime records every request of a ProxyRuntime with its callback; the test answers
// them (after the call that made them has returned, as the interface promises).
//
// Threading: thread-safe. Cost: none that matters (tests).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "serve_runtime/proxy_runtime.h"
#include "serve_runtime/replica_runtime.h"
#include "serve_runtime/replica_set_source.h"

namespace tessera::serve::fakes {

// How long a test waits for something that happens at once when the code is right: a bound
// against hanging, never a measured time.
inline constexpr absl::Duration kPatience = absl::Seconds(30);

inline bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

class FakeReplicaRuntime : public ReplicaRuntime {
 public:
  struct CallRecord {
    std::string replica_id;
    std::string method;
    std::optional<std::string> argument;
  };
  struct StreamRecord {
    std::string replica_id;
    std::string method;
    std::string argument;
    bool cancelled = false;
    int items_entered = 0;   // on_item calls begun
    int items_returned = 0;  // on_item calls that returned
  };
  // Called (on the fake's thread) for each new stream, with its index: may call Item and End.
  using Responder = std::function<void(size_t index, const StreamRecord& stream)>;

  FakeReplicaRuntime() : thread_([this] { Run(); }) {}
  ~FakeReplicaRuntime() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  // get_num_ongoing_requests of `replica_id` answers this (a count, or an error).
  void SetQueueLen(const std::string& replica_id, absl::StatusOr<int64_t> answer) {
    absl::MutexLock lock(&mu_);
    queue_lens_.insert_or_assign(replica_id, std::move(answer));
  }
  void SetResponder(Responder responder) {
    absl::MutexLock lock(&mu_);
    responder_ = std::move(responder);
  }
  // Calls of `method` of `replica_id` answer this from now on (other methods than the probe's
  // and cancel_request's; without an answer they fail Unimplemented).
  void SetAnswer(const std::string& replica_id, const std::string& method,
                 absl::StatusOr<std::string> answer) {
    absl::MutexLock lock(&mu_);
    answers_.insert_or_assign(std::make_pair(replica_id, method), std::move(answer));
  }
  // While held, calls of `method` are recorded but answered only at ReleaseHeld (in order).
  void HoldCalls(const std::string& method) {
    absl::MutexLock lock(&mu_);
    held_method_ = method;
  }
  void ReleaseHeld() {
    absl::MutexLock lock(&mu_);
    held_method_.reset();
    for (std::function<void()>& answer : held_) queue_.push_back(std::move(answer));
    held_.clear();
  }

  void Start(const ReplicaLaunch&, std::function<void(const std::string&)>,
             std::function<void(absl::StatusOr<ReplicaAddress>)> done) override {
    Post([done = std::move(done)] { done(absl::UnimplementedError("not in this fake")); });
  }
  void Find(const std::string&, std::function<void(absl::StatusOr<ReplicaAddress>)> done) override {
    Post([done = std::move(done)] { done(absl::UnimplementedError("not in this fake")); });
  }
  void Kill(const std::string&) override {}

  void Call(const std::string& replica_id, const std::string& method,
            std::optional<std::string> argument, absl::Duration,
            std::function<void(absl::StatusOr<std::string>)> done) override {
    absl::StatusOr<std::string> result = absl::UnimplementedError(method);
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back({replica_id, method, std::move(argument)});
      if (method == "get_num_ongoing_requests") {
        auto known = queue_lens_.find(replica_id);
        if (known == queue_lens_.end()) {
          result = absl::StatusOr<std::string>("0");
        } else if (known->second.ok()) {
          result = absl::StatusOr<std::string>(absl::StrCat(*known->second));
        } else {
          result = absl::StatusOr<std::string>(known->second.status());
        }
      } else if (method == "cancel_request") {
        result = absl::StatusOr<std::string>("True");
      } else if (auto answer = answers_.find({replica_id, method}); answer != answers_.end()) {
        result = answer->second;
      }
      if (held_method_ == method) {
        held_.push_back([done = std::move(done), result = std::move(result)] { done(result); });
        return;
      }
    }
    Post([done = std::move(done), result = std::move(result)] { done(result); });
  }

  std::unique_ptr<ReplicaStream> CallStreaming(const std::string& replica_id,
                                               const std::string& method, std::string argument,
                                               std::function<void(std::string)> on_item,
                                               std::function<void(absl::Status)> on_end) override {
    size_t index = 0;
    {
      absl::MutexLock lock(&mu_);
      index = streams_.size();
      streams_.push_back(Stream{StreamRecord{replica_id, method, std::move(argument)},
                                std::move(on_item), std::move(on_end)});
      if (responder_) {
        Responder responder = responder_;
        StreamRecord record = streams_.back().record;
        queue_.push_back([responder, index, record] { responder(index, record); });
      }
    }
    return std::make_unique<Handle>(this, index);
  }

  // The stream's next item, or its end (once; later ones are dropped, as after a cancel).
  void Item(size_t index, std::string item) {
    Post([this, index, item = std::move(item)] {
      std::function<void(std::string)> on_item;
      {
        absl::MutexLock lock(&mu_);
        if (streams_[index].ended) return;
        on_item = streams_[index].on_item;
        ++streams_[index].record.items_entered;
      }
      on_item(item);
      absl::MutexLock lock(&mu_);
      ++streams_[index].record.items_returned;
    });
  }
  void End(size_t index, absl::Status status) {
    Post([this, index, status = std::move(status)] {
      std::function<void(absl::Status)> on_end;
      {
        absl::MutexLock lock(&mu_);
        if (streams_[index].ended) return;
        streams_[index].ended = true;
        on_end = streams_[index].on_end;
      }
      on_end(status);
    });
  }

  std::vector<CallRecord> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  size_t calls_of(const std::string& method) const {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const CallRecord& call : calls_) n += call.method == method ? 1 : 0;
    return n;
  }
  size_t stream_count() const {
    absl::MutexLock lock(&mu_);
    return streams_.size();
  }
  StreamRecord stream(size_t index) const {
    absl::MutexLock lock(&mu_);
    return streams_.at(index).record;
  }

 private:
  struct Stream {
    StreamRecord record;
    std::function<void(std::string)> on_item;
    std::function<void(absl::Status)> on_end;
    bool ended = false;
  };

  class Handle : public ReplicaStream {
   public:
    Handle(FakeReplicaRuntime* runtime, size_t index) : runtime_(runtime), index_(index) {}
    // As the real one: the stream ends with Cancelled (once).
    void Cancel() override {
      {
        absl::MutexLock lock(&runtime_->mu_);
        runtime_->streams_[index_].record.cancelled = true;
      }
      runtime_->End(index_, absl::CancelledError("the stream was cancelled"));
    }

   private:
    FakeReplicaRuntime* const runtime_;
    const size_t index_;
  };

  void Post(std::function<void()> work) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(work));
  }

  void Run() {
    while (true) {
      std::function<void()> work;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::StatusOr<int64_t>> queue_lens_ ABSL_GUARDED_BY(mu_);
  Responder responder_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, absl::StatusOr<std::string>> answers_
      ABSL_GUARDED_BY(mu_);
  std::optional<std::string> held_method_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> held_ ABSL_GUARDED_BY(mu_);
  std::vector<CallRecord> calls_ ABSL_GUARDED_BY(mu_);
  std::deque<Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class FakeReplicaSetSource : public ReplicaSetSource {
 public:
  // The set of (application, deployment) becomes `set` with the fake's next version, returned.
  uint64_t Publish(const std::string& application, const std::string& deployment,
                   v1::GetServeReplicasResponse set) {
    absl::MutexLock lock(&mu_);
    set.set_version(++version_);
    sets_[{application, deployment}] = std::move(set);
    return version_;
  }
  // (application, deployment) is gone: its polls answer NotFound.
  void Remove(const std::string& application, const std::string& deployment) {
    absl::MutexLock lock(&mu_);
    ++version_;
    sets_.erase({application, deployment});
  }
  // The route table becomes `routes` with the fake's next version, returned.
  uint64_t PublishRoutes(std::vector<RouteEntry> routes) {
    absl::MutexLock lock(&mu_);
    routes_ = RouteTable{.version = ++version_, .routes = std::move(routes)};
    return version_;
  }
  // Every poll answers Unavailable from now on, at once.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  absl::StatusOr<v1::GetServeReplicasResponse> GetReplicas(const std::string& application,
                                                           const std::string& deployment,
                                                           uint64_t known_version,
                                                           absl::Duration) override {
    absl::MutexLock lock(&mu_);
    const std::pair<std::string, std::string> key{application, deployment};
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = sets_.find(key);
      return closed_ ||
             (it == sets_.end() ? known_version != 0 : it->second.version() != known_version);
    };
    mu_.Await(absl::Condition(&changed));
    if (closed_) return absl::UnavailableError("the fake source is closed");
    auto it = sets_.find(key);
    if (it == sets_.end()) return absl::NotFoundError(absl::StrCat("no ", application));
    return it->second;
  }
  absl::StatusOr<RouteTable> GetRoutes(uint64_t known_version, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return closed_ || (routes_.has_value() && routes_->version != known_version);
    };
    mu_.Await(absl::Condition(&changed));
    if (closed_) return absl::UnavailableError("the fake source is closed");
    return *routes_;
  }
  void Report(const v1::ServeAutoscalingSample& sample) override {
    absl::MutexLock lock(&mu_);
    reports_.push_back(sample);
  }

  std::vector<v1::ServeAutoscalingSample> reports() const {
    absl::MutexLock lock(&mu_);
    return reports_;
  }

 private:
  mutable absl::Mutex mu_;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<std::string, std::string>, v1::GetServeReplicasResponse> sets_
      ABSL_GUARDED_BY(mu_);
  std::optional<RouteTable> routes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::ServeAutoscalingSample> reports_ ABSL_GUARDED_BY(mu_);
};

class FakeProxyRuntime : public ProxyRuntime {
 public:
  using Done = std::function<void(absl::StatusOr<std::string>)>;
  struct StartRequest {
    ProxyLaunch launch;
    Done done;
  };
  struct FindRequest {
    std::string node_id;
    Done done;
  };
  struct CallRequest {
    std::string node_id;
    std::string method;
    absl::Duration timeout;
    Done done;
  };

  void StartProxy(const ProxyLaunch& launch, Done done) override {
    absl::MutexLock lock(&mu_);
    starts_.push_back({launch, std::move(done)});
  }
  void FindProxy(const std::string& node_id, Done done) override {
    absl::MutexLock lock(&mu_);
    finds_.push_back({node_id, std::move(done)});
  }
  void CallProxy(const std::string& node_id, const std::string& method, absl::Duration timeout,
                 Done done) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back({node_id, method, timeout, std::move(done)});
  }
  void KillProxy(const std::string& node_id) override {
    absl::MutexLock lock(&mu_);
    kills_.push_back(node_id);
  }

  // The requests not yet taken (the test answers them), oldest first.
  std::vector<StartRequest> TakeStarts() {
    absl::MutexLock lock(&mu_);
    return std::exchange(starts_, {});
  }
  std::vector<FindRequest> TakeFinds() {
    absl::MutexLock lock(&mu_);
    return std::exchange(finds_, {});
  }
  std::vector<CallRequest> TakeCalls() {
    absl::MutexLock lock(&mu_);
    return std::exchange(calls_, {});
  }
  // Every node whose proxy was killed, in order (not taken).
  std::vector<std::string> kills() const {
    absl::MutexLock lock(&mu_);
    return kills_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<StartRequest> starts_ ABSL_GUARDED_BY(mu_);
  std::vector<FindRequest> finds_ ABSL_GUARDED_BY(mu_);
  std::vector<CallRequest> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> kills_ ABSL_GUARDED_BY(mu_);
};

// A replica of a published set.
inline v1::ServeReplica MakeReplica(const std::string& id, int max_ongoing_requests = 5,
                                    const std::string& node = "n1") {
  v1::ServeReplica replica;
  replica.set_replica_id(id);
  replica.set_actor_id(absl::StrCat("actor-", id));
  replica.set_node_id(node);
  replica.set_max_ongoing_requests(max_ongoing_requests);
  return replica;
}

inline v1::GetServeReplicasResponse MakeSet(const std::string& deployment,
                                            std::vector<v1::ServeReplica> replicas,
                                            int max_queued_requests = -1) {
  v1::GetServeReplicasResponse set;
  set.set_deployment(deployment);
  for (v1::ServeReplica& replica : replicas) *set.add_replicas() = std::move(replica);
  set.set_max_queued_requests(max_queued_requests);
  return set;
}

}  // namespace tessera::serve::fakes
