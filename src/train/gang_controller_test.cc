#include "train/gang_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "resources/quantity.h"

namespace tessera::train {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// How long a test waits for the controller to reach a point before it fails (never reached
// when the controller works).
constexpr absl::Duration kPatience = absl::Seconds(5);

v1::WorkerExit Exited(int code) {
  v1::WorkerExit exit;
  exit.set_exit_code(code);
  exit.set_reason(absl::StrCat("exited with code ", code));
  return exit;
}

v1::WorkerExit Killed(int signal) {
  v1::WorkerExit exit;
  exit.set_exit_code(-1);
  exit.set_signal(signal);
  exit.set_reason(absl::StrCat("killed by signal ", signal));
  return exit;
}

// One watch of one rank: ends once (by the test, by a signal, or by Cancel); after the watch is
// destroyed its callbacks are never called. Callbacks run under `mu` so that the destructor
// waits for one in progress, as a real watch thread is joined.
struct WatchState {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  std::function<void(bool, const std::string&)> output ABSL_GUARDED_BY(mu);
  std::function<void(RankEnd)> ended ABSL_GUARDED_BY(mu);

  bool End(RankEnd end) {
    absl::MutexLock lock(&mu);
    if (done) return false;
    done = true;
    ended(std::move(end));
    return true;
  }
  void Output(bool is_stderr, const std::string& data) {
    absl::MutexLock lock(&mu);
    if (!done) output(is_stderr, data);
  }
  void Detach() {
    absl::MutexLock lock(&mu);
    done = true;
  }
};

class FakeRankWatch : public RankWatch {
 public:
  explicit FakeRankWatch(std::shared_ptr<WatchState> state) : state_(std::move(state)) {}
  ~FakeRankWatch() override {
    Cancel();
    state_->Detach();
  }
  void Cancel() override { state_->End(absl::CancelledError("watch cancelled")); }

 private:
  std::shared_ptr<WatchState> state_;
};

struct Signalled {
  int rank = 0;
  std::string worker_id;
  int signal = 0;
};

// A cluster of `nodes` nodes (n0, n1, ...) on 127.0.0.1 that places any gang at once, one CPU
// per slot, slots spread over the nodes in contiguous runs.
//
// Thread-safe: one mutex; callbacks into the controller are made without it.
class FakeGangBackend : public GangBackend {
 public:
  explicit FakeGangBackend(int nodes) : nodes_(nodes) {}

  // --- Knobs, set before the controller runs ---
  void FailReserve(absl::Status status) {
    absl::MutexLock lock(&mu_);
    reserve_error_ = std::move(status);
  }
  // Reserve waits, polling `stopped`, and answers Cancelled once it is true.
  void ReserveWaitsUntilStopped() {
    absl::MutexLock lock(&mu_);
    reserve_waits_ = true;
  }
  // StartRank of `rank` fails during the reservation numbered `attempt` (1 = the first).
  void FailStart(int attempt, int rank, absl::Status status) {
    absl::MutexLock lock(&mu_);
    start_failures_[{attempt, rank}] = std::move(status);
  }
  void IgnoreSigterm(int rank) {
    absl::MutexLock lock(&mu_);
    ignores_sigterm_.insert(rank);
  }

  // --- GangBackend ---
  // Room for this many members (an elastic gang gets what fits); unlimited by default.
  void SetRoom(int members) {
    absl::MutexLock lock(&mu_);
    room_ = members;
  }

  absl::StatusOr<GangReservation> Reserve(const std::string& name,
                                          const v1::GangPlacement& /*placement*/, GangSize size,
                                          absl::Duration /*timeout*/,
                                          const std::function<bool()>& stopped) override {
    bool waits = false;
    int world = size.max;
    {
      absl::MutexLock lock(&mu_);
      reserves_.push_back(name);
      waits = reserve_waits_;
      if (!waits && !reserve_error_.ok()) return reserve_error_;
      world = std::min(size.max, room_);
      if (world < size.min) return absl::ResourceExhaustedError("no room for the minimum");
    }
    if (waits) {
      const absl::Time give_up = absl::Now() + kPatience;
      while (!stopped()) {
        if (absl::Now() > give_up) return absl::DeadlineExceededError("never stopped");
        absl::SleepFor(absl::Milliseconds(1));
      }
      return absl::CancelledError("stopped while waiting for the reservation");
    }
    GangReservation reservation;
    reservation.name = name;
    reservation.members = world;
    reservation.explanation = "fake";
    const int per_node = (world + nodes_ - 1) / nodes_;
    for (int i = 0; i < world; ++i) {
      GangSlot slot;
      slot.bundle_index = i;
      slot.node_id = absl::StrCat("n", i / per_node);
      slot.host = "127.0.0.1";
      reservation.slots.push_back(slot);
      v1::Resources resources;
      (*resources.mutable_raw())["CPU"] = Quantity::kScale;
      reservation.slot_resources.push_back(resources);
      reservation.visible_bundles.emplace_back();
    }
    return reservation;
  }

  absl::StatusOr<size_t> WriteStdin(const StartedRank& rank, const std::string& data,
                                    bool close) override {
    absl::MutexLock lock(&mu_);
    stdin_[rank.worker_id] += data;
    if (close) stdin_[rank.worker_id] += "<EOF>";
    return data.size();
  }
  std::map<std::string, std::string> stdin_written() const {
    absl::MutexLock lock(&mu_);
    return stdin_;
  }

  // The head's word on nodes: these are dead.
  void SetDeadNodes(std::set<std::string> nodes) {
    absl::MutexLock lock(&mu_);
    dead_nodes_ = std::move(nodes);
  }
  absl::StatusOr<std::set<std::string>> DeadNodes(const std::set<std::string>& nodes) override {
    absl::MutexLock lock(&mu_);
    ++dead_node_checks_;
    std::set<std::string> dead;
    for (const std::string& node : nodes) {
      if (dead_nodes_.contains(node)) dead.insert(node);
    }
    return dead;
  }

  absl::StatusOr<bool> RoomToGrow(const v1::GangPlacement& /*placement*/, int extra,
                                  const GangReservation& current) override {
    absl::MutexLock lock(&mu_);
    ++room_checks_;
    return room_ >= current.members + extra;
  }
  int room_checks() const {
    absl::MutexLock lock(&mu_);
    return room_checks_;
  }
  int dead_node_checks() const {
    absl::MutexLock lock(&mu_);
    return dead_node_checks_;
  }

  void Release(const GangReservation& reservation) override {
    absl::MutexLock lock(&mu_);
    releases_.push_back(reservation.name);
  }

  absl::StatusOr<NodePort> FreePort(const GangSlot& slot) override {
    absl::MutexLock lock(&mu_);
    return NodePort{next_port_++, absl::StrCat("eth-", slot.node_id)};
  }

  absl::Status PrepareWorkingDir(const GangSlot& slot, const JobId& /*job_id*/,
                                 const std::string& /*archive*/) override {
    absl::MutexLock lock(&mu_);
    prepared_.push_back(slot.node_id);
    return absl::OkStatus();
  }

  absl::StatusOr<StartedRank> StartRank(const RankLaunch& launch) override {
    absl::MutexLock lock(&mu_);
    const int attempt = static_cast<int>(reserves_.size());
    launches_.push_back(launch);
    if (auto it = start_failures_.find({attempt, launch.rank}); it != start_failures_.end()) {
      return it->second;
    }
    StartedRank started;
    started.rank = launch.rank;
    started.node_id = launch.slot.node_id;
    started.agent_address = "127.0.0.1:7000";
    started.worker_id = absl::StrCat("w", attempt, "-", launch.rank);
    started.pid = 1000 + launch.rank;
    return started;
  }

  std::unique_ptr<RankWatch> WatchRank(const StartedRank& rank,
                                       std::function<void(bool, const std::string&)> output,
                                       std::function<void(RankEnd)> ended) override {
    auto state = std::make_shared<WatchState>();
    {
      absl::MutexLock state_lock(&state->mu);
      state->output = std::move(output);
      state->ended = std::move(ended);
    }
    absl::MutexLock lock(&mu_);
    by_worker_[rank.worker_id] = state;
    current_[rank.rank] = state;
    ++watches_;
    return std::make_unique<FakeRankWatch>(state);
  }

  absl::Status SignalRank(const StartedRank& rank, int signal) override {
    std::shared_ptr<WatchState> state;
    bool ignore = false;
    {
      absl::MutexLock lock(&mu_);
      signals_.push_back({rank.rank, rank.worker_id, signal});
      if (auto it = by_worker_.find(rank.worker_id); it != by_worker_.end()) state = it->second;
      ignore = signal == SIGTERM && ignores_sigterm_.contains(rank.rank);
    }
    if (state != nullptr && !ignore && (signal == SIGTERM || signal == SIGKILL)) {
      state->End(Killed(signal));  // inline: the controller calls without its lock
    }
    return absl::OkStatus();
  }

  // --- For the test thread ---
  // Waits until `count` watches were made in all (every rank of every attempt so far).
  bool AwaitWatches(int count) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watches_ >= count; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPatience);
  }
  // Waits until `count` signals were sent in all.
  bool AwaitSignals(int count) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(signals_.size()) >= count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPatience);
  }
  bool AwaitReserves(int count) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(reserves_.size()) >= count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPatience);
  }
  // Ends the latest watch of `rank` as given; false when it had already ended.
  bool EndRank(int rank, RankEnd end) {
    std::shared_ptr<WatchState> state = Current(rank);
    return state != nullptr && state->End(std::move(end));
  }
  void Output(int rank, bool is_stderr, const std::string& data) {
    if (std::shared_ptr<WatchState> state = Current(rank)) state->Output(is_stderr, data);
  }

  std::vector<std::string> reserves() const {
    absl::MutexLock lock(&mu_);
    return reserves_;
  }
  std::vector<std::string> releases() const {
    absl::MutexLock lock(&mu_);
    return releases_;
  }
  std::vector<RankLaunch> launches() const {
    absl::MutexLock lock(&mu_);
    return launches_;
  }
  // The launches of the given attempt (1 = the first), by rank.
  // The launches into one reservation, by rank (attempts of an elastic gang differ in size).
  std::map<int, RankLaunch> launches_in(const std::string& reservation) const {
    absl::MutexLock lock(&mu_);
    std::map<int, RankLaunch> by_rank;
    for (const RankLaunch& launch : launches_) {
      if (launch.reservation == reservation) by_rank[launch.rank] = launch;
    }
    return by_rank;
  }
  std::map<int, RankLaunch> launches_of(int attempt) const {
    absl::MutexLock lock(&mu_);
    std::map<int, RankLaunch> by_rank;
    const size_t world = launches_.size() / std::max<size_t>(1, reserves_.size());
    for (size_t i = (attempt - 1) * world; i < attempt * world && i < launches_.size(); ++i) {
      by_rank[launches_[i].rank] = launches_[i];
    }
    return by_rank;
  }
  std::vector<Signalled> signals() const {
    absl::MutexLock lock(&mu_);
    return signals_;
  }
  // The signals `rank` was sent, in order.
  std::vector<int> signals_to(int rank) const {
    std::vector<int> sent;
    for (const Signalled& s : signals()) {
      if (s.rank == rank) sent.push_back(s.signal);
    }
    return sent;
  }
  std::vector<std::string> prepared() const {
    absl::MutexLock lock(&mu_);
    return prepared_;
  }

 private:
  std::shared_ptr<WatchState> Current(int rank) {
    absl::MutexLock lock(&mu_);
    auto it = current_.find(rank);
    return it == current_.end() ? nullptr : it->second;
  }

  const int nodes_;
  mutable absl::Mutex mu_;
  absl::Status reserve_error_ ABSL_GUARDED_BY(mu_);
  bool reserve_waits_ ABSL_GUARDED_BY(mu_) = false;
  int room_ ABSL_GUARDED_BY(mu_) = 1 << 20;
  std::set<std::string> dead_nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> stdin_ ABSL_GUARDED_BY(mu_);
  int room_checks_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<int, int>, absl::Status> start_failures_ ABSL_GUARDED_BY(mu_);
  std::set<int> ignores_sigterm_ ABSL_GUARDED_BY(mu_);
  int next_port_ ABSL_GUARDED_BY(mu_) = 29500;
  std::vector<std::string> reserves_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> releases_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> prepared_ ABSL_GUARDED_BY(mu_);
  std::vector<RankLaunch> launches_ ABSL_GUARDED_BY(mu_);
  std::vector<Signalled> signals_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<WatchState>> by_worker_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::shared_ptr<WatchState>> current_ ABSL_GUARDED_BY(mu_);
  int watches_ ABSL_GUARDED_BY(mu_) = 0;
  int dead_node_checks_ ABSL_GUARDED_BY(mu_) = 0;
};

// The controller's Run() on its own thread. Join() fails the test (and stops the job) when it
// does not end in time, so a broken controller fails instead of hanging.
class RunningController {
 public:
  explicit RunningController(GangControllerOptions options)
      : controller_(std::move(options)), thread_([this] {
          result_ = controller_.Run();
          done_.Notify();
        }) {}
  ~RunningController() {
    if (thread_.joinable()) {
      controller_.Stop("the test ended");
      thread_.join();
    }
  }

  GangController& controller() { return controller_; }

  v1::JobStatus Join() {
    if (!done_.WaitForNotificationWithTimeout(kPatience)) {
      ADD_FAILURE() << "the controller did not end; its status: "
                    << controller_.status().ShortDebugString();
      controller_.Stop("the test timed out");
    }
    thread_.join();
    return result_;
  }

 private:
  GangController controller_;
  v1::JobStatus result_;
  absl::Notification done_;
  std::thread thread_;
};

v1::JobSpec WorkersSpec(int workers, int max_restarts) {
  v1::JobSpec spec;
  spec.set_name("train");
  spec.add_argv("python");
  spec.add_argv("train.py");
  (*spec.mutable_env())["FOO"] = "bar";
  v1::GangPlacement* p = spec.mutable_placement();
  p->set_min_workers(workers);
  p->set_max_workers(workers);
  (*p->mutable_resources_per_worker()->mutable_raw())["CPU"] = Quantity::kScale;
  spec.set_max_restarts(max_restarts);
  spec.set_torch_env(true);
  spec.set_stop_grace_ms(2000);  // never waited in full: the fake ends ranks on SIGTERM
  spec.set_start_timeout_ms(1000);
  return spec;
}

class GangControllerTest : public ::testing::Test {
 protected:
  GangControllerOptions Options(v1::JobSpec spec) {
    GangControllerOptions options;
    options.job_id = JobId("job-1");
    options.spec = std::move(spec);
    options.backend = &backend_;
    options.on_change = [this](const v1::JobStatus& status) {
      absl::MutexLock lock(&published_mu_);
      published_.push_back(status);
    };
    return options;
  }

  std::vector<v1::GangJobState> PublishedStates() {
    absl::MutexLock lock(&published_mu_);
    std::vector<v1::GangJobState> states;
    for (const v1::JobStatus& status : published_) states.push_back(status.state());
    return states;
  }
  v1::JobStatus LastPublished() {
    absl::MutexLock lock(&published_mu_);
    return published_.empty() ? v1::JobStatus() : published_.back();
  }

  // The controller's timers on a clock the test moves (OnFakeClock).
  GangControllerOptions OnFakeClock(v1::JobSpec spec) {
    GangControllerOptions options = Options(std::move(spec));
    options.clock = &clock_;
    return options;
  }
  // Real time in which a controller that read the real clock would have acted.
  static void GiveItAMoment() { absl::SleepFor(absl::Milliseconds(50)); }

  FakeGangBackend backend_{/*nodes=*/2};
  FakeClock clock_;
  absl::Mutex published_mu_;
  std::vector<v1::JobStatus> published_ ABSL_GUARDED_BY(published_mu_);
};

TEST_F(GangControllerTest, AllRanksExitingZeroSucceedsAndReleasesOnce) {
  RunningController run(Options(WorkersSpec(4, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(4));
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(backend_.EndRank(r, Exited(0)));

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.exit_code(), 0);
  EXPECT_EQ(status.restart_count(), 0);
  EXPECT_EQ(status.world_size(), 4);
  EXPECT_EQ(status.reservation(), "job-1-0");
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-0"));
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
  EXPECT_TRUE(backend_.signals().empty());
  ASSERT_EQ(status.ranks_size(), 4);
  for (const v1::RankStatus& rank : status.ranks())
    EXPECT_EQ(rank.state(), v1::RANK_STATE_SUCCEEDED);
  EXPECT_EQ(status.ranks(3).worker_id(), "w1-3");
  EXPECT_EQ(status.ranks(3).pid(), 1003);
}

TEST_F(GangControllerTest, EveryRankGetsTheTorchrunEnvironmentAndTheUsersEnv) {
  RunningController run(Options(WorkersSpec(4, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(4));
  for (int r = 0; r < 4; ++r) backend_.EndRank(r, Exited(0));
  run.Join();

  std::map<int, RankLaunch> launches = backend_.launches_of(1);
  ASSERT_EQ(launches.size(), 4u);
  for (const auto& [rank, launch] : launches) {
    SCOPED_TRACE(rank);
    const std::map<std::string, std::string>& env = launch.env;
    EXPECT_THAT(env, Contains(Pair("RANK", absl::StrCat(rank))));
    EXPECT_THAT(env, Contains(Pair("WORLD_SIZE", "4")));
    // Two nodes of two ranks: n0 runs ranks 0 and 1, n1 ranks 2 and 3.
    EXPECT_THAT(env, Contains(Pair("LOCAL_RANK", absl::StrCat(rank % 2))));
    EXPECT_EQ(launch.slot.node_id, rank < 2 ? "n0" : "n1");
    EXPECT_THAT(env, Contains(Pair("MASTER_ADDR", "127.0.0.1")));
    EXPECT_THAT(env, Contains(Pair("MASTER_PORT", "29500")));
    EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_RESTART_COUNT", "0")));
    EXPECT_THAT(env, Contains(Pair("TESSERA_JOB_ID", "job-1")));
    EXPECT_THAT(env, Contains(Pair("FOO", "bar")));
    // The collectives' sockets on the interface the rank's own node is reached on.
    EXPECT_THAT(env, Contains(Pair("GLOO_SOCKET_IFNAME", rank < 2 ? "eth-n0" : "eth-n1")));
    EXPECT_THAT(launch.argv, ElementsAre("python", "train.py"));
    EXPECT_EQ(launch.reservation, "job-1-0");
    EXPECT_EQ(launch.job_id, JobId("job-1"));
    EXPECT_FALSE(launch.working_dir_job.has_value()) << "the job ships no working directory";
  }
}

TEST_F(GangControllerTest, AWorkingDirectoryIsShippedToEachNodeOnceAndEveryRankRunsInIt) {
  v1::JobSpec spec = WorkersSpec(4, 0);
  spec.set_working_dir("the archive");
  RunningController run(Options(spec));
  ASSERT_TRUE(backend_.AwaitWatches(4));
  for (int r = 0; r < 4; ++r) backend_.EndRank(r, Exited(0));
  EXPECT_EQ(run.Join().state(), v1::GANG_JOB_STATE_SUCCEEDED);

  EXPECT_THAT(backend_.prepared(), ElementsAre("n0", "n1"));
  std::map<int, RankLaunch> launches = backend_.launches_of(1);
  ASSERT_EQ(launches.size(), 4u);
  for (const auto& [rank, launch] : launches) {
    ASSERT_TRUE(launch.working_dir_job.has_value()) << "rank " << rank;
    EXPECT_EQ(*launch.working_dir_job, JobId("job-1")) << "rank " << rank;
  }
}

TEST_F(GangControllerTest, WithoutTorchEnvOnlyTheUsersEnvAndTheJobIdAreSet) {
  v1::JobSpec spec = WorkersSpec(2, 0);
  spec.set_torch_env(false);
  RunningController run(Options(spec));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  for (int r = 0; r < 2; ++r) backend_.EndRank(r, Exited(0));
  run.Join();

  for (const auto& [rank, launch] : backend_.launches_of(1)) {
    EXPECT_THAT(launch.env, ElementsAre(Pair("FOO", "bar"), Pair("TESSERA_JOB_ID", "job-1")));
  }
}

TEST_F(GangControllerTest, AFailedRankWithBudgetStopsTheGangAndRestartsItWhole) {
  RunningController run(Options(WorkersSpec(2, 1)));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  ASSERT_TRUE(backend_.EndRank(1, Exited(3)));

  // The second attempt: the gang was stopped, released and reserved again.
  ASSERT_TRUE(backend_.AwaitWatches(4));
  std::vector<Signalled> signals = backend_.signals();
  ASSERT_EQ(signals.size(), 1u);
  EXPECT_EQ(signals[0].rank, 0);
  EXPECT_EQ(signals[0].worker_id, "w1-0");
  EXPECT_EQ(signals[0].signal, SIGTERM);
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-0", "job-1-1"));
  std::map<int, RankLaunch> second = backend_.launches_of(2);
  ASSERT_EQ(second.size(), 2u);
  for (const auto& [rank, launch] : second) {
    EXPECT_THAT(launch.env, Contains(Pair("TORCHELASTIC_RESTART_COUNT", "1")));
    EXPECT_THAT(launch.env, Contains(Pair("TORCHELASTIC_RUN_ID", "job-1")));
    EXPECT_EQ(launch.reservation, "job-1-1");
  }

  for (int r = 0; r < 2; ++r) EXPECT_TRUE(backend_.EndRank(r, Exited(0)));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.restart_count(), 1);
  EXPECT_EQ(status.exit_code(), 0);
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0", "job-1-1"));
  EXPECT_THAT(PublishedStates(), Contains(v1::GANG_JOB_STATE_RESTARTING));
}

TEST_F(GangControllerTest, AFailedRankWithNoBudgetLeftFailsTheJobWithItsCode) {
  RunningController run(Options(WorkersSpec(2, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  ASSERT_TRUE(backend_.EndRank(1, Exited(3)));

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_EQ(status.exit_code(), 3);
  EXPECT_THAT(status.message(), HasSubstr("rank 1"));
  EXPECT_THAT(status.message(), HasSubstr("n1"));
  EXPECT_THAT(status.message(), HasSubstr("exited with code 3"));
  EXPECT_EQ(status.restart_count(), 0);
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-0"));
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
  ASSERT_EQ(status.ranks_size(), 2);
  EXPECT_EQ(status.ranks(1).state(), v1::RANK_STATE_FAILED);
  EXPECT_EQ(status.ranks(0).state(), v1::RANK_STATE_STOPPED);
}

TEST_F(GangControllerTest, ARankKilledBySignal9EndsTheJobWithCode137) {
  RunningController run(Options(WorkersSpec(2, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  ASSERT_TRUE(backend_.EndRank(0, Killed(SIGKILL)));

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_EQ(status.exit_code(), 137);
  EXPECT_THAT(status.message(), HasSubstr("rank 0 on node n0 (127.0.0.1) was killed by signal 9"));
}

TEST_F(GangControllerTest, StopWhileRunningSignalsEveryRankAndReleases) {
  RunningController run(Options(WorkersSpec(3, 5)));
  ASSERT_TRUE(backend_.AwaitWatches(3));
  run.controller().Stop("stopped by request");

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_STOPPED);
  EXPECT_EQ(status.message(), "stopped by request");
  EXPECT_EQ(status.exit_code(), 128 + SIGTERM);
  EXPECT_EQ(status.restart_count(), 0);  // a stop is no failure
  std::map<int, int> signal_by_rank;
  for (const Signalled& s : backend_.signals()) signal_by_rank[s.rank] = s.signal;
  EXPECT_THAT(signal_by_rank, ElementsAre(Pair(0, SIGTERM), Pair(1, SIGTERM), Pair(2, SIGTERM)));
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-0"));
}

TEST_F(GangControllerTest, ARankIgnoringSigtermGetsSigkillAfterTheGrace) {
  v1::JobSpec spec = WorkersSpec(2, 0);
  spec.set_stop_grace_ms(50);
  backend_.IgnoreSigterm(0);
  RunningController run(Options(spec));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  run.controller().Stop("stopped by request");

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_STOPPED);
  EXPECT_THAT(backend_.signals_to(0), ElementsAre(SIGTERM, SIGKILL));
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
}

// The stop grace runs on the controller's clock: an hour of it passes without an hour of waiting.
TEST_F(GangControllerTest, TheStopGraceIsTimedByTheControllersClock) {
  v1::JobSpec spec = WorkersSpec(2, 0);
  spec.set_stop_grace_ms(absl::ToInt64Milliseconds(absl::Hours(1)));
  backend_.IgnoreSigterm(0);
  RunningController run(OnFakeClock(spec));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  run.controller().Stop("stopped by request");
  ASSERT_TRUE(backend_.AwaitSignals(2));  // SIGTERM to both ranks
  GiveItAMoment();
  EXPECT_EQ(backend_.signals().size(), 2u) << "SIGKILL before the grace passed";
  clock_.Advance(absl::Hours(1));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_STOPPED);
  EXPECT_THAT(backend_.signals_to(0), ElementsAre(SIGTERM, SIGKILL));
  // The ranks' times are the controller's clock's.
  EXPECT_EQ(status.ranks(0).end_time_ms(), absl::ToUnixMillis(clock_.Now()));
  EXPECT_EQ(status.submit_time_ms(), absl::ToUnixMillis(clock_.Now() - absl::Hours(1)));
}

// The head's word on dead nodes is asked once a second of the controller's clock.
TEST_F(GangControllerTest, TheDeadNodeCheckIsTimedByTheControllersClock) {
  RunningController run(OnFakeClock(WorkersSpec(4, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(4));
  backend_.SetDeadNodes({"n1"});
  GiveItAMoment();
  EXPECT_EQ(backend_.dead_node_checks(), 0);
  EXPECT_EQ(run.controller().status().state(), v1::GANG_JOB_STATE_RUNNING);
  clock_.Advance(absl::Seconds(1));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_THAT(status.message(), HasSubstr("the head declared node n1 dead"));
  EXPECT_EQ(backend_.dead_node_checks(), 1);
}

// An elastic gang looks for room when its check interval passes on the controller's clock.
TEST_F(GangControllerTest, TheElasticCheckIsTimedByTheControllersClock) {
  v1::JobSpec spec = WorkersSpec(4, 0);
  spec.mutable_placement()->set_min_workers(2);
  spec.set_elastic_check_ms(absl::ToInt64Milliseconds(absl::Hours(1)));
  backend_.SetRoom(3);
  RunningController run(OnFakeClock(spec));
  ASSERT_TRUE(backend_.AwaitWatches(3));
  backend_.SetRoom(4);
  clock_.Advance(absl::Minutes(59));  // health checks only
  GiveItAMoment();
  EXPECT_EQ(backend_.room_checks(), 0);
  clock_.Advance(absl::Minutes(1));
  ASSERT_TRUE(backend_.AwaitWatches(3 + 4));
  EXPECT_EQ(backend_.room_checks(), 1);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(backend_.EndRank(r, Exited(0)));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.membership_changes(), 1);
}

TEST_F(GangControllerTest, StopWhileWaitingForTheReservationEndsStopped) {
  backend_.ReserveWaitsUntilStopped();
  RunningController run(Options(WorkersSpec(2, 3)));
  ASSERT_TRUE(backend_.AwaitReserves(1));
  run.controller().Stop("the client went away");

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_STOPPED);
  EXPECT_EQ(status.message(), "the client went away");
  EXPECT_TRUE(backend_.releases().empty());  // nothing was held
  EXPECT_TRUE(backend_.launches().empty());
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-0"));
}

TEST_F(GangControllerTest, AGangThatCannotBePlacedFailsWithoutRetrying) {
  backend_.FailReserve(absl::ResourceExhaustedError("no node has 64 CPU"));
  RunningController run(Options(WorkersSpec(2, 3)));

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_EQ(status.exit_code(), 1);
  EXPECT_THAT(status.message(), HasSubstr("cannot place the gang"));
  EXPECT_THAT(status.message(), HasSubstr("no node has 64 CPU"));
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-0"));
  EXPECT_TRUE(backend_.releases().empty());
  EXPECT_TRUE(backend_.launches().empty());
}

TEST_F(GangControllerTest, ARankThatCannotStartKillsTheOthersAndCountsAsAFailure) {
  backend_.FailStart(/*attempt=*/1, /*rank=*/1, absl::UnavailableError("agent is down"));
  RunningController run(Options(WorkersSpec(2, 1)));
  // The first attempt makes no watches: the second one's are the first two.
  ASSERT_TRUE(backend_.AwaitWatches(2));
  std::vector<Signalled> signals = backend_.signals();
  ASSERT_EQ(signals.size(), 1u);
  EXPECT_EQ(signals[0].worker_id, "w1-0");
  EXPECT_EQ(signals[0].signal, SIGKILL);
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-0", "job-1-1"));

  for (int r = 0; r < 2; ++r) backend_.EndRank(r, Exited(0));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.restart_count(), 1);
}

TEST_F(GangControllerTest, ARankThatCannotStartWithNoBudgetFailsTheJobNamingTheNode) {
  backend_.FailStart(/*attempt=*/1, /*rank=*/1, absl::UnavailableError("agent is down"));
  RunningController run(Options(WorkersSpec(2, 0)));

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_EQ(status.exit_code(), 1);
  EXPECT_THAT(status.message(), HasSubstr("rank 1 could not start on node n1: agent is down"));
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
}

TEST_F(GangControllerTest, AWatchEndingInAnErrorIsAFailureThatLostContact) {
  RunningController run(Options(WorkersSpec(2, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  ASSERT_TRUE(backend_.EndRank(1, absl::UnavailableError("node n1 unreachable")));

  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_EQ(status.exit_code(), 1);
  EXPECT_THAT(status.message(), HasSubstr("rank 1 on node n1 (127.0.0.1) lost contact"));
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
}

TEST_F(GangControllerTest, OnChangeIsCalledWithTheFinalState) {
  RunningController run(Options(WorkersSpec(2, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  backend_.EndRank(0, Exited(0));
  backend_.EndRank(1, Exited(0));

  v1::JobStatus status = run.Join();
  std::vector<v1::GangJobState> states = PublishedStates();
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.front(), v1::GANG_JOB_STATE_PENDING);
  EXPECT_THAT(states, Contains(v1::GANG_JOB_STATE_STARTING));
  EXPECT_THAT(states, Contains(v1::GANG_JOB_STATE_RUNNING));
  v1::JobStatus last = LastPublished();
  EXPECT_EQ(last.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(last.exit_code(), status.exit_code());
  EXPECT_GT(last.end_time_ms(), 0);
  EXPECT_EQ(run.controller().status().state(), v1::GANG_JOB_STATE_SUCCEEDED);
}

TEST_F(GangControllerTest, StopAfterTheEndChangesNothing) {
  RunningController run(Options(WorkersSpec(1, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(1));
  backend_.EndRank(0, Exited(0));
  run.Join();
  run.controller().Stop("too late");
  EXPECT_EQ(run.controller().status().state(), v1::GANG_JOB_STATE_SUCCEEDED);
}

// The record a head kept of job-1 while it ran (its ranks started on `first`), as a restarted
// head reads it back.
v1::StoredTrainJob RecordWhileRunning(GangControllerOptions options, FakeGangBackend& first,
                                      int world) {
  options.backend = &first;
  options.on_change = nullptr;
  RunningController run(std::move(options));
  EXPECT_TRUE(first.AwaitWatches(world));
  return run.controller().record();  // the controller then ends: the old head is gone
}

TEST_F(GangControllerTest, AnAdoptedJobWatchesItsRanksAgainWithoutStartingThem) {
  FakeGangBackend first(/*nodes=*/2);
  v1::StoredTrainJob record = RecordWhileRunning(Options(WorkersSpec(2, 1)), first, 2);
  ASSERT_TRUE(record.has_running());
  EXPECT_EQ(record.status().state(), v1::GANG_JOB_STATE_RUNNING);
  EXPECT_EQ(record.running().reservation(), "job-1-0");

  GangControllerOptions options = Options(WorkersSpec(2, 1));
  options.resume = record;
  RunningController run(std::move(options));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(backend_.EndRank(r, Exited(0)));
  v1::JobStatus status = run.Join();

  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.restart_count(), 0);
  EXPECT_TRUE(backend_.reserves().empty());
  EXPECT_TRUE(backend_.launches().empty());
  EXPECT_TRUE(backend_.signals().empty());
  EXPECT_THAT(backend_.releases(), Contains("job-1-0"));
  EXPECT_EQ(status.ranks(1).worker_id(), "w1-1");
  EXPECT_EQ(status.ranks(1).pid(), 1001);
}

TEST_F(GangControllerTest, AnAdoptedRankThatFailedIsARestartFromTheBudget) {
  FakeGangBackend first(/*nodes=*/2);
  GangControllerOptions options = Options(WorkersSpec(2, 1));
  options.resume = RecordWhileRunning(Options(WorkersSpec(2, 1)), first, 2);
  RunningController run(std::move(options));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  ASSERT_TRUE(backend_.EndRank(1, Exited(3)));  // it died while the head was down

  ASSERT_TRUE(backend_.AwaitWatches(4));  // the whole gang again, in a new reservation
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-1"));
  for (int r = 0; r < 2; ++r) backend_.EndRank(r, Exited(0));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.restart_count(), 1);
}

TEST_F(GangControllerTest, AnAdoptedJobThatWasStartingReleasesAndStartsTheNextAttempt) {
  FakeGangBackend first(/*nodes=*/2);
  first.ReserveWaitsUntilStopped();
  v1::StoredTrainJob record;
  {
    GangControllerOptions waiting = Options(WorkersSpec(2, 0));
    waiting.backend = &first;
    waiting.on_change = nullptr;
    RunningController run(std::move(waiting));
    ASSERT_TRUE(first.AwaitReserves(1));
    record = run.controller().record();
  }
  EXPECT_FALSE(record.has_running());

  GangControllerOptions options = Options(WorkersSpec(2, 0));
  options.resume = record;
  RunningController run(std::move(options));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  for (int r = 0; r < 2; ++r) backend_.EndRank(r, Exited(0));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.restart_count(), 0);
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0", "job-1-1"));
  EXPECT_THAT(backend_.reserves(), ElementsAre("job-1-1"));
}

TEST_F(GangControllerTest, AnAdoptedJobWhoseRanksAllSucceededEndsWithoutRunningAgain) {
  // The last head went after the attempt's end, before the job's.
  v1::StoredTrainJob record;
  *record.mutable_spec() = WorkersSpec(2, 0);
  record.mutable_status()->set_job_id("job-1");
  record.mutable_status()->set_state(v1::GANG_JOB_STATE_RUNNING);
  for (int r = 0; r < 2; ++r) {
    v1::RankStatus* rank = record.mutable_status()->add_ranks();
    rank->set_rank(r);
    rank->set_state(v1::RANK_STATE_SUCCEEDED);
  }
  GangControllerOptions options = Options(WorkersSpec(2, 0));
  options.resume = record;
  RunningController run(std::move(options));
  v1::JobStatus status = run.Join();

  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(backend_.reserves().empty());
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
}

TEST_F(GangControllerTest, RankOutputAndTheControllersNotesGoToTheJobLog) {
  const std::filesystem::path base = std::filesystem::temp_directory_path() /
                                     absl::StrCat("tessera_gang_controller_test_", ::getpid());
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  {
    absl::StatusOr<std::unique_ptr<JobLog>> log = JobLog::Create((base / "job-1").string());
    ASSERT_TRUE(log.ok()) << log.status();
    GangControllerOptions options = Options(WorkersSpec(2, 0));
    options.log = log->get();
    RunningController run(std::move(options));
    ASSERT_TRUE(backend_.AwaitWatches(2));
    backend_.Output(1, false, "epoch 1\npartial");
    backend_.EndRank(1, Exited(0));
    backend_.EndRank(0, Exited(0));
    v1::JobStatus status = run.Join();
    EXPECT_EQ(status.log_dir(), (base / "job-1").string());

    std::string text;
    for (const LogChunk& chunk : (*log)->Read(0, 1 << 20)) text += chunk.data;
    EXPECT_THAT(text, HasSubstr("tessera: attempt 1: 2 ranks running on job-1-0"));
    EXPECT_THAT(text, HasSubstr("[rank1]: epoch 1\n[rank1]: partial\n"));
    EXPECT_THAT(text, HasSubstr("tessera: job job-1 succeeded"));
  }
  std::error_code ignored;
  std::filesystem::remove_all(base, ignored);
}

TEST(DescribeRankEndTest, NamesTheRankTheNodeAndHowItEnded) {
  GangSlot slot;
  slot.node_id = "v6e-0-w2";
  slot.host = "127.0.0.1";
  EXPECT_EQ(DescribeRankEnd(2, slot, Exited(3)),
            "rank 2 on node v6e-0-w2 (127.0.0.1) exited with code 3");
  v1::WorkerExit sigkill = Killed(SIGKILL);
  sigkill.set_reason("killed by signal 9 (SIGKILL)");
  EXPECT_EQ(DescribeRankEnd(2, slot, sigkill),
            "rank 2 on node v6e-0-w2 (127.0.0.1) was killed by signal 9 (SIGKILL)");
  v1::WorkerExit oom;
  oom.set_out_of_memory(true);
  oom.set_reason("out of memory");
  EXPECT_EQ(DescribeRankEnd(2, slot, oom), "rank 2 on node v6e-0-w2 (127.0.0.1) was out of memory");
  EXPECT_EQ(DescribeRankEnd(2, slot, absl::UnavailableError("node gone")),
            "rank 2 on node v6e-0-w2 (127.0.0.1) lost contact: node gone");
}

TEST(DescribeRankEndTest, WithoutAReasonItIsWrittenFromTheCodeOrSignal) {
  GangSlot slot;
  slot.node_id = "n0";
  slot.host = "10.0.0.1";
  v1::WorkerExit code;
  code.set_exit_code(2);
  EXPECT_EQ(DescribeRankEnd(0, slot, code), "rank 0 on node n0 (10.0.0.1) exited with code 2");
  v1::WorkerExit signal;
  signal.set_exit_code(-1);
  signal.set_signal(SIGTERM);
  EXPECT_EQ(DescribeRankEnd(0, slot, signal),
            "rank 0 on node n0 (10.0.0.1) was killed by signal 15");
}

TEST(ExitCodeOfTest, IsTheCodeOr128PlusTheSignal) {
  EXPECT_EQ(ExitCodeOf(Exited(0)), 0);
  EXPECT_EQ(ExitCodeOf(Exited(3)), 3);
  EXPECT_EQ(ExitCodeOf(Killed(SIGKILL)), 137);
  EXPECT_EQ(ExitCodeOf(Killed(SIGTERM)), 143);
  v1::WorkerExit oom;
  oom.set_exit_code(-1);
  oom.set_out_of_memory(true);
  EXPECT_EQ(ExitCodeOf(oom), 137);
  EXPECT_EQ(ExitCodeOf(absl::UnavailableError("lost")), 1);
}

TEST_F(GangControllerTest, AnElasticGangStartsWithWhatFitsAndGrowsWithoutCountingARestart) {
  v1::JobSpec spec = WorkersSpec(4, 0);
  spec.mutable_placement()->set_min_workers(2);
  spec.set_elastic_check_ms(5);
  backend_.SetRoom(3);
  RunningController run(Options(spec));
  ASSERT_TRUE(backend_.AwaitWatches(3));
  std::map<int, RankLaunch> first = backend_.launches_in("job-1-0");
  ASSERT_EQ(first.size(), 3u);
  EXPECT_THAT(first.at(0).env, Contains(Pair("WORLD_SIZE", "3")));
  // Room for the fourth worker returns: the gang stops and comes back with 4 ranks.
  backend_.SetRoom(4);
  ASSERT_TRUE(backend_.AwaitWatches(3 + 4));
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(backend_.EndRank(r, Exited(0)));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.world_size(), 4);
  EXPECT_EQ(status.membership_changes(), 1);
  EXPECT_EQ(status.restart_count(), 0);  // a membership change is not a restart
  std::map<int, RankLaunch> second = backend_.launches_in("job-1-1");
  ASSERT_EQ(second.size(), 4u);
  for (const auto& [rank, launch] : second) {
    EXPECT_THAT(launch.env, Contains(Pair("WORLD_SIZE", "4")));
    EXPECT_THAT(launch.env, Contains(Pair("TORCHELASTIC_RESTART_COUNT", "0")));
  }
  EXPECT_GE(backend_.room_checks(), 1);
}

TEST_F(GangControllerTest, AnElasticGangShrinksOnAFailureAndCountsIt) {
  v1::JobSpec spec = WorkersSpec(4, 1);
  spec.mutable_placement()->set_min_workers(2);
  spec.set_elastic_check_ms(60000);
  RunningController run(Options(spec));
  ASSERT_TRUE(backend_.AwaitWatches(4));
  backend_.SetRoom(2);  // a node is lost with the failure
  ASSERT_TRUE(backend_.EndRank(3, absl::UnavailableError("node gone")));
  ASSERT_TRUE(backend_.AwaitWatches(4 + 2));
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(backend_.EndRank(r, Exited(0)));
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_SUCCEEDED);
  EXPECT_EQ(status.world_size(), 2);
  EXPECT_EQ(status.restart_count(), 1);
  EXPECT_EQ(status.membership_changes(), 0);
  std::map<int, RankLaunch> second = backend_.launches_in("job-1-1");
  ASSERT_EQ(second.size(), 2u);
  EXPECT_THAT(second.at(1).env, Contains(Pair("TORCHELASTIC_RESTART_COUNT", "1")));
}

TEST_F(GangControllerTest, ARankOnANodeTheHeadDeclaredDeadFailsTheGangWithoutItsWatchEnding) {
  RunningController run(Options(WorkersSpec(4, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(4));
  // n1 froze: its ranks' watches never end, but the head declares it dead.
  backend_.SetDeadNodes({"n1"});
  v1::JobStatus status = run.Join();
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_THAT(status.message(), HasSubstr("on node n1"));
  EXPECT_THAT(status.message(), HasSubstr("the head declared node n1 dead"));
  EXPECT_THAT(backend_.releases(), ElementsAre("job-1-0"));
}

TEST_F(GangControllerTest, StdinGoesToRankZeroOfTheRunningAttemptOnly) {
  v1::JobSpec spec = WorkersSpec(2, 0);
  spec.set_forward_stdin(true);
  RunningController run(Options(spec));
  ASSERT_TRUE(backend_.AwaitWatches(2));
  std::map<int, RankLaunch> launches = backend_.launches_of(1);
  EXPECT_TRUE(launches.at(0).stdin_pipe);
  EXPECT_FALSE(launches.at(1).stdin_pipe);
  auto written = run.controller().WriteStdin("line 1\n", /*close=*/false);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, 7u);
  ASSERT_TRUE(run.controller().WriteStdin("", /*close=*/true).ok());
  EXPECT_EQ(backend_.stdin_written().at("w1-0"), "line 1\n<EOF>");
  for (int r = 0; r < 2; ++r) backend_.EndRank(r, Exited(0));
  run.Join();
  // After the end nobody takes input.
  EXPECT_EQ(run.controller().WriteStdin("late", false).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(GangControllerTest, AJobWithoutForwardedStdinRefusesInput) {
  RunningController run(Options(WorkersSpec(1, 0)));
  ASSERT_TRUE(backend_.AwaitWatches(1));
  EXPECT_EQ(run.controller().WriteStdin("x", false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  backend_.EndRank(0, Exited(0));
  run.Join();
}

}  // namespace
}  // namespace tessera::train
