#include "train/job_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tessera/v1/train_state.pb.h"

namespace tessera::train {
namespace {

using ::testing::HasSubstr;

// Job records in a map; `down` makes it a store that is down (Put refused, Keep held back).
class MapRecordStore final : public JobRecordStore {
 public:
  absl::Status Writable() const override {
    absl::MutexLock lock(&mu_);
    return down_ ? absl::UnavailableError("state store unavailable: down; nothing was changed")
                 : absl::OkStatus();
  }
  absl::Status Put(const JobId& job_id, const std::string& record) override {
    absl::MutexLock lock(&mu_);
    if (down_) return absl::UnavailableError("state store unavailable: down; nothing was changed");
    records_[job_id.value()] = record;
    return absl::OkStatus();
  }
  void Keep(const JobId& job_id, const std::string& record) override {
    absl::MutexLock lock(&mu_);
    if (!down_) records_[job_id.value()] = record;
  }
  void Forget(const JobId& job_id) override {
    absl::MutexLock lock(&mu_);
    records_.erase(job_id.value());
  }
  absl::StatusOr<std::vector<std::pair<JobId, std::string>>> List() const override {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<JobId, std::string>> listed;
    for (const auto& [id, record] : records_) listed.emplace_back(JobId(id), record);
    return listed;
  }
  std::map<std::string, std::string> records() const {
    absl::MutexLock lock(&mu_);
    return records_;
  }
  void set_down(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> records_ ABSL_GUARDED_BY(mu_);
  bool down_ ABSL_GUARDED_BY(mu_) = false;
};

// A cluster with no room: every gang fails to be placed at once.
class FullCluster final : public GangBackend {
 public:
  absl::StatusOr<GangReservation> Reserve(const std::string&, const v1::GangPlacement&, GangSize,
                                          absl::Duration, const std::function<bool()>&) override {
    return absl::ResourceExhaustedError("no room");
  }
  absl::StatusOr<bool> RoomToGrow(const v1::GangPlacement&, int, const GangReservation&) override {
    return false;
  }
  void Release(const GangReservation&) override {}
  absl::StatusOr<NodePort> FreePort(const GangSlot&) override { return NodePort{}; }
  absl::Status PrepareWorkingDir(const GangSlot&, const JobId&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<StartedRank> StartRank(const RankLaunch&) override {
    return absl::UnavailableError("never");
  }
  std::unique_ptr<RankWatch> WatchRank(const StartedRank&,
                                       std::function<void(bool, const std::string&)>,
                                       std::function<void(RankEnd)>) override {
    return nullptr;
  }
  absl::Status SignalRank(const StartedRank&, int) override { return absl::OkStatus(); }
  absl::StatusOr<size_t> WriteStdin(const StartedRank&, const std::string&, bool) override {
    return 0;
  }
  absl::StatusOr<std::set<std::string>> DeadNodes(const std::set<std::string>&) override {
    return std::set<std::string>();
  }
};

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("tessera_job_manager_test_", ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::unique_ptr<JobManager> NewManager() {
    JobManagerOptions options;
    options.jobs_dir = (dir_ / "jobs").string();
    options.backends = []() -> absl::StatusOr<std::unique_ptr<GangBackend>> {
      return std::make_unique<FullCluster>();
    };
    options.records = &store_;
    return std::make_unique<JobManager>(std::move(options));
  }

  std::filesystem::path dir_;
  MapRecordStore store_;
};

v1::SubmitJobRequest OneWorker() {
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_name("kept");
  request.mutable_spec()->add_argv("true");
  v1::GangPlacement* placement = request.mutable_spec()->mutable_placement();
  placement->set_min_workers(1);
  placement->set_max_workers(1);
  (*placement->mutable_resources_per_worker()->mutable_raw())["CPU"] = 1000;
  return request;
}

TEST_F(JobManagerTest, AJobsRecordIsKeptAndTheNextManagerListsTheEndedJob) {
  std::string job_id;
  {
    std::unique_ptr<JobManager> first = NewManager();
    ASSERT_TRUE(first->Resume().ok());
    const v1::SubmitJobRequest request = OneWorker();
    v1::JobStatus submitted;
    const grpc::Status accepted = first->SubmitJob(nullptr, &request, &submitted);
    ASSERT_TRUE(accepted.ok()) << accepted.error_message();
    job_id = submitted.job_id();
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    v1::JobStatus status;
    for (absl::Time give_up = absl::Now() + absl::Seconds(10);
         status.state() != v1::GANG_JOB_STATE_FAILED && absl::Now() < give_up;
         absl::SleepFor(absl::Milliseconds(5))) {
      ASSERT_TRUE(first->GetJob(nullptr, &get, &status).ok());
    }
    ASSERT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED) << status.ShortDebugString();
  }  // the head goes (its manager with it)
  ASSERT_TRUE(store_.records().contains(job_id));
  v1::StoredTrainJob record;
  ASSERT_TRUE(record.ParseFromString(store_.records().at(job_id)));
  EXPECT_EQ(record.status().state(), v1::GANG_JOB_STATE_FAILED);
  EXPECT_EQ(record.spec().name(), "kept");

  std::unique_ptr<JobManager> next = NewManager();
  v1::GetJobRequest get;
  get.set_job_id("kept");
  v1::JobStatus status;
  // Before it adopts the stored jobs, it cannot say a job is unknown.
  EXPECT_EQ(next->GetJob(nullptr, &get, &status).error_code(), grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(next->Resume().ok());
  ASSERT_TRUE(next->GetJob(nullptr, &get, &status).ok());
  EXPECT_EQ(status.job_id(), job_id);
  EXPECT_EQ(status.state(), v1::GANG_JOB_STATE_FAILED);
  v1::JobList list;
  ASSERT_TRUE(next->ListGangJobs(nullptr, nullptr, &list).ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).job_id(), job_id);
}

TEST_F(JobManagerTest, ASubmissionTheStoreCannotKeepIsRefusedAndListsNothing) {
  std::unique_ptr<JobManager> manager = NewManager();
  ASSERT_TRUE(manager->Resume().ok());
  store_.set_down(true);
  const v1::SubmitJobRequest request = OneWorker();
  v1::JobStatus submitted;
  const grpc::Status refused = manager->SubmitJob(nullptr, &request, &submitted);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr("nothing was changed"));
  v1::JobList list;
  ASSERT_TRUE(manager->ListGangJobs(nullptr, nullptr, &list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
  EXPECT_TRUE(store_.records().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "jobs")) << "nothing made for a refused job";
  // The store is back: the same request is taken.
  store_.set_down(false);
  ASSERT_TRUE(manager->SubmitJob(nullptr, &request, &submitted).ok());
  EXPECT_TRUE(store_.records().contains(submitted.job_id()));
}

TEST_F(JobManagerTest, ABadWorkingDirArchiveIsRefusedByTheSubmitCallAndMakesNoJob) {
  std::unique_ptr<JobManager> manager = NewManager();
  ASSERT_TRUE(manager->Resume().ok());
  v1::SubmitJobRequest request = OneWorker();
  v1::DirectoryArchive archive;
  v1::DirectoryArchive::Entry* entry = archive.add_entries();
  entry->set_path("../escape.py");
  entry->set_data("print('out')");
  request.mutable_spec()->set_working_dir(archive.SerializeAsString());
  v1::JobStatus submitted;
  const grpc::Status refused = manager->SubmitJob(nullptr, &request, &submitted);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("spec.working_dir: working dir archive: entry"));
  EXPECT_EQ(refused.error_message().find('\n'), std::string::npos);
  v1::JobList list;
  ASSERT_TRUE(manager->ListGangJobs(nullptr, nullptr, &list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
  EXPECT_TRUE(store_.records().empty());
}

TEST_F(JobManagerTest, ARecordThatIsNotOneStopsTheAdoptionNamingIt) {
  ASSERT_TRUE(store_.Put(JobId("job-0badbad0"), "not a record").ok());
  std::unique_ptr<JobManager> manager = NewManager();
  absl::Status resumed = manager->Resume();
  EXPECT_EQ(resumed.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(resumed.message(), HasSubstr("train_jobs/job-0badbad0"));
}

}  // namespace
}  // namespace tessera::train
