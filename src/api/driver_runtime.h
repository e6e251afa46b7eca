// DriverRuntime: the process-wide state behind tessera::Init in a driver: the Owner service
// (workers say ready, fetch owned objects), the object table of owned values, the task submitter
// and the worker leases, and a reaper that lets idle workers go.
//
// Threading: thread-safe; Create and Shutdown are called by Init/Shutdown only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "api/actor_directory_client.h"
#include "api/borrower_watch.h"
#include "api/driver_keepalive.h"
#include "api/foreign_calls.h"
#include "api/lease_shape_key.h"
#include "api/multiple_returns.h"
#include "api/object_table.h"
#include "api/streaming_generators.h"
#include "api/task_event_reporter.h"
#include "api/task_submitter.h"
#include "api/worker_leases.h"
#include "client/state_folder.h"
#include "objects/object_node_store.h"
#include "rpc/server.h"
#include "tessera/tessera.h"

namespace tessera::api {

class DriverRuntime {
 public:
  static absl::StatusOr<std::unique_ptr<DriverRuntime>> Create(const InitOptions& options);
  ~DriverRuntime();

  // This driver's id at the head: the owner of what it reserves.
  const std::string& driver_id() const { return owner_.worker_id; }
  // The job its work belongs to (its leases' job id, its timeline): the job of the process it
  // runs in (TESSERA_JOB_ID: a task's nested driver, a `tessera run` program, a gang's rank),
  // else its own driver id.
  const std::string& job_id() const { return job_id_; }
  // This job's timeline as the head has it, in the Chrome trace format (timeline/chrome_trace.h),
  // after sending the runs not reported yet. FailedPrecondition without a head.
  absl::StatusOr<std::string> TimelineJson();

  ObjectRefBase Submit(internal::AnyFunction fn, const TaskOptions& options,
                       std::vector<internal::TaskArgument> args);
  // `more_returns` (may be null) gets the refs of returns 2..N of a task with num_returns N > 1.
  ObjectRefBase SubmitByName(const internal::FunctionDescriptor& function,
                             const TaskOptions& options, std::vector<internal::TaskArgument> args,
                             std::vector<ObjectRefBase>* more_returns = nullptr);
  // The value: inline from the table, or a pinned view of the local store for a large one
  // (pulled from its node first when it lies elsewhere).
  absl::StatusOr<internal::SerializedValue> Get(const ObjectRefBase& ref, absl::Duration timeout);
  // ready[i] once `num` are ready or `timeout` passed; with `stop_at_failure` also as soon as
  // one of this owner's is done with an error. Another process's object is asked about at its
  // owner (a peek), about every 50 ms while waiting.
  std::vector<bool> Wait(const std::vector<const ObjectRefBase*>& refs, int num,
                         absl::Duration timeout, bool stop_at_failure = false);
  // The error an object this runtime owns is done with (OK while pending, done with a value, or
  // owned elsewhere).
  absl::Status Failure(const ObjectRefBase& ref) const;
  ObjectRefBase Put(std::string value);
  ObjectRefBase PutParts(const std::vector<std::string_view>& parts,
                         const std::vector<ObjectRefData>& contained);
  // A reference to `ref` held by this process: a local reference to an object it owns (none,
  // when it was freed already), else this process's borrowed reference (worker::Borrow).
  ObjectRefBase Hold(const ObjectRefData& ref);
  // tessera.cancel of the task that makes `ref` (TaskSubmitter::Cancel); a ref of another owner
  // or one that is not a task's return is InvalidArgument.
  absl::Status Cancel(const ObjectRefBase& ref, bool force, bool recursive);
  // Every task this runtime submitted from inside task `parent` (binary id) that is not finished
  // (a worker's runtime, when that task is cancelled recursively).
  void CancelSubmittedBy(const std::string& parent, bool force) {
    submitter_->CancelSubmittedBy(parent, force);
  }
  // An object of this driver whose value FulfillPromise gives later (until then Get waits).
  ObjectRefBase NewPromise();
  void FulfillPromise(const ObjectId& id, absl::StatusOr<std::string> value);

  // Actors (include/tessera/actor.h): the id (hex) of a new actor, or why it cannot be made.
  absl::StatusOr<std::string> CreateActor(internal::AnyFunction factory,
                                          const ActorOptions& options,
                                          std::vector<internal::TaskArgument> args,
                                          const char* type_name);
  absl::StatusOr<std::string> CreateActorByName(const internal::FunctionDescriptor& function,
                                                const ActorOptions& options,
                                                std::vector<internal::TaskArgument> args,
                                                const std::string& type_name);
  ObjectRefBase SubmitActorTask(const std::string& actor_id, const std::string& method,
                                std::vector<internal::TaskArgument> args,
                                const internal::ActorCallOptions& options = {},
                                std::vector<ObjectRefBase>* more_returns = nullptr);
  absl::Status KillActor(const std::string& actor_id);
  // An object of this driver that stands for the handles of actor `actor_id` (a Python actor it
  // made, unnamed and not detached): copies of a handle carry it, so it is counted like any
  // ref, and once it is freed (every handle, here and in borrowers, gone) the actor ends after
  // the calls made before (__ray_terminate__, then KillActor), as Ray ends such an actor.
  ObjectRefBase ActorLifetimeRef(const std::string& actor_id);
  // The next value of the streaming generator task whose ref is `generator` (StreamingGenerators:
  // item `index`, waiting up to `timeout`), nullopt past its last; DeadlineExceeded meanwhile.
  absl::StatusOr<std::optional<ObjectRefBase>> GeneratorNext(const ObjectRefBase& generator,
                                                             int64_t index, absl::Duration timeout);
  // The consumer of `generator` is done before item `next_index` (the rest are let go).
  void ReleaseGenerator(const ObjectRefBase& generator, int64_t next_index);
  // internal::WhenReady: `ready` once this owner's `ref` is done (FailedPrecondition for
  // another owner's, or an early error's ref).
  absl::Status WhenReady(const ObjectRefBase& ref, std::function<void()> ready);
  StreamingGenerators& generators() { return *generators_; }
  // KillActor of an actor this driver made (Owner.KillActor); NotFound for any other.
  absl::Status KillOwnedActor(const std::string& actor_id);
  // The id of the live actor named `name`; `type_name` "" matches any class.
  absl::StatusOr<std::string> FindNamedActor(const std::string& name, const char* type_name,
                                             const std::string& name_space = "");
  // ActorOptions::handle_metadata of a named actor made here or found by name; "" none known.
  std::string ActorHandleMetadata(const std::string& actor_id) ABSL_LOCKS_EXCLUDED(actors_mu_);
  // Where an actor this runtime owns runs now, and its class (Owner.LocateActor).
  absl::StatusOr<v1::LocateActorReply> LocateOwnedActor(const std::string& actor_id);
  // Makes calls to actor `actor_id`, owned by the process at `owner_address`, possible here (a
  // handle passed to this process): OK at once when it is known here already.
  absl::Status AttachActorById(const std::string& actor_id, const std::string& owner_address);
  TaskStats stats() const { return submitter_->stats(); }
  void Shutdown();

  ObjectTable& objects() { return *objects_; }
  const std::shared_ptr<ObjectTable>& objects_shared() const { return objects_; }
  NodeObjectStore& store() { return *store_; }
  // The store socket of `node_id` in this host's state folder ("" when it has none there).
  std::string StoreSocketOf(const std::string& node_id) const;
  WorkerLeases& leases() { return *leases_; }
  // The address refs owned here name (a ref naming another is someone else's object).
  const OwnerAddress& owner() const { return owner_; }

 private:
  DriverRuntime() = default;
  // The steps of Create, in order, after the store is open.
  // The table of owned values: a value's stored copies go with its last reference, and the refs
  // inside it are held as borrowed from `own_address` (this owner's, once it serves).
  void MakeObjectTable(const std::shared_ptr<std::string>& own_address);
  // The task submitter, which delivers every task's outcome into the table.
  void MakeSubmitter();
  // Serves the Owner service and lends and counts borrowed refs under its address (into
  // `own_address`).
  absl::Status ServeOwner(const std::string& token, std::string& own_address);
  // The head's stubs, the actor directory and the worker leases; FailedPrecondition when the
  // state folder shows no cluster.
  absl::Status StartLeases(const client::StateFolder& state, const std::string& token,
                           const std::string& head_address);
  // The keepalive at the head, the task event reporter and the reaper's thread.
  void StartBackgroundWork();
  // The lease shape of `options`, made once per distinct shape (the entry of shapes_, which is
  // never erased, so the pointer stays valid for the runtime's life).
  absl::StatusOr<const LeaseShape*> ShapeFor(const TaskOptions& options);
  static absl::StatusOr<LeaseShape> MakeShape(std::string key, const TaskOptions& options);
  ObjectRefBase MakeOwnedRef(const ObjectId& id);
  // Holds the refs written inside serialized `value` (a task's argument) into `holds`.
  void HoldRefsInside(const std::string& value, std::vector<ObjectRefBase>* holds);
  // Why a task or call `name` of `language` cannot return `num_returns` objects (OK when it can).
  static absl::Status CheckNumReturns(const std::string& name, int num_returns,
                                      v1::Language language);
  // Why a task or call cannot be a streaming generator as asked (OK when it can).
  static absl::Status CheckStreaming(const std::string& name, bool streaming, int num_returns,
                                     v1::Language language);
  // Puts `args` into the task's spec (values inline, refs of other owners as refs) and holds
  // them for it: the refs owned here, with their argument's index, to be inlined once ready.
  std::vector<std::pair<int, ObjectRefBase>> AddArguments(std::vector<internal::TaskArgument>& args,
                                                          QueuedTask& task);
  // Submits `task` once every argument of `waits` (owned here) is ready, each inlined or passed
  // as a stored object's ref; its result fails with the first argument that failed instead.
  void SubmitWhenArgumentsReady(std::shared_ptr<QueuedTask> task, const LeaseShape& shape,
                                const std::vector<std::pair<int, ObjectRefBase>>& waits);
  // Marks `spec` (whose first return is `first`) a streaming generator of this owner, when it is.
  void ExpectStream(const ObjectId& first, bool streaming, v1::TaskSpec& spec);
  // Makes returns 2..num_returns of `first`'s task pending (their refs into `more_returns`, may
  // be null) and has them delivered from its answer; nothing for one return.
  void ExpectMoreReturns(const ObjectId& first, int num_returns,
                         std::vector<ObjectRefBase>* more_returns);
  // The value of an object another process owns, from that owner (OwnerDiedError's kind when
  // the owner has exited).
  absl::StatusOr<internal::SerializedValue> ReadForeign(const ObjectRefBase& ref,
                                                        absl::Duration timeout);

  InitOptions options_;
  std::string state_dir_;
  OwnerAddress owner_;
  // This node's store (the node of the agent the driver leases through).
  std::shared_ptr<NodeObjectStore> store_;
  std::shared_ptr<ObjectTable> objects_;
  // Tasks with several returns, and the delivery of every task's outcome into the table.
  std::shared_ptr<MultipleReturns> returns_;
  // Streaming generator tasks of this owner: the values they yielded, as they come.
  std::shared_ptr<StreamingGenerators> generators_;
  std::unique_ptr<TaskSubmitter> submitter_;
  std::unique_ptr<WorkerLeases> leases_;
  std::unique_ptr<grpc::Service> owner_service_;
  std::unique_ptr<rpc::RpcServer> server_;
  TaskId driver_task_;
  std::atomic<uint32_t> puts_{0};

  absl::Mutex shapes_mu_;
  std::map<LeaseShapeKey, absl::StatusOr<LeaseShape>, LeaseShapeKeyLess> shapes_
      ABSL_GUARDED_BY(shapes_mu_);

  struct ActorEntry {
    std::string shape_key;
    std::string name;
    std::string type_name;
    std::string name_space;  // where `name` is unique
    bool attached = false;   // owned by another driver, found by name in the head's directory
    std::string owner;       // at the head: this driver's id
    bool detached = false;   // lifetime="detached": outlives this driver
    // Runs one call at a time (max_concurrency 1, no concurrency groups; ActorInfo's).
    bool calls_in_order = false;
    int restarts = 0;
    v1::Language language = v1::LANGUAGE_CPP;
    std::optional<ObjectRefBase> code;  // its class, for workers of other languages
    // Its live process's Worker service ("" while an owned one has none); attached: the one
    // its guest stream goes to.
    std::string address;
    std::string worker_id;  // owned: the node agent's id of that process
    bool dead = false;
    std::string handle_metadata;  // ActorOptions::handle_metadata (named actors; ActorInfo's)
    // Attached: its guest stream is being set up by the thread that recorded it; calls
    // submitted before it is would find no actor in the submitter, so other threads attaching
    // the same actor wait for it (AttachAt).
    bool attaching = false;
  };
  // The head's record of a named actor of this driver, in `state`.
  v1::ActorInfo DirectoryRecord(const std::string& id, const ActorEntry& entry,
                                v1::ActorState state) const;
  // Puts the constructor's arguments of actor class `name` into its spec, each ref resolved to
  // its value (waiting for it).
  absl::Status AddConstructorArguments(const std::string& name,
                                       std::vector<internal::TaskArgument>& args,
                                       QueuedTask& constructor);
  // Records actor `id` (and its name, unique in its namespace in this driver and, with a head,
  // in the cluster's directory); AlreadyExists and the directory's errors leave nothing behind.
  absl::Status RegisterActor(const std::string& id, const ActorEntry& entry,
                             const ActorOptions& options);
  // A worker of `shape_key` is up: a named actor of this driver is alive there.
  void OnWorkerReady(const std::string& shape_key, const std::string& address,
                     const std::string& node_id, const std::string& worker_id);
  // tessera::Kill of another driver's actor: its process is asked to end (Worker.ExitActor),
  // which has its owner end it when the owner lives; a detached actor with no owner left is
  // reported dead to the head first.
  absl::Status KillAttachedActor(const std::string& actor_id, const ActorEntry& entry);
  // The submitter's actor observer (under its mutex: only queues): a named actor of this driver
  // restarts or is dead.
  void OnActorChanged(const std::string& shape_key, const ActorChange& change);
  absl::StatusOr<std::string> AttachNamedActor(const std::string& name, const char* type_name,
                                               const std::string& name_space);
  // Opens a guest stream to the actor's process at `address` (`calls_in_order`: it runs one
  // call at a time, so its calls may wait for a batch).
  absl::Status AttachAt(const std::string& id, const std::string& name,
                        const std::string& name_space, const std::string& class_name,
                        const std::string& address, bool calls_in_order);
  std::string token_;
  std::string job_id_;
  // The head's services this driver calls, their stubs on one channel (a stub is cheap; the
  // channel is the connection); all null without a head.
  std::unique_ptr<v1::HeadActors::Stub> head_actors_;              // the actor directory
  std::unique_ptr<v1::HeadReservations::Stub> head_reservations_;  // the keepalive
  std::unique_ptr<v1::HeadJobs::Stub> head_jobs_;                  // timelines
  // Named actors at the head; nullptr without a head (names are then this driver's only).
  std::unique_ptr<ActorDirectoryClient> directory_;
  absl::Mutex attached_mu_;
  std::vector<std::shared_ptr<GrpcWorkerChannel>> attached_ ABSL_GUARDED_BY(attached_mu_);
  absl::Mutex actors_mu_;
  std::map<std::string, ActorEntry> actors_ ABSL_GUARDED_BY(actors_mu_);  // by id
  // (namespace, name) -> id of this driver's live named actors.
  std::map<std::pair<std::string, std::string>, std::string> actor_names_
      ABSL_GUARDED_BY(actors_mu_);

  // The actors whose handles all went (ActorLifetimeRef): their objects, and those to end (the
  // table's drop hook adds them; the reaper ends them, outside whatever lock dropped them).
  struct ActorLifetimes {
    absl::Mutex mu;
    std::map<ObjectId, std::string> actor_of ABSL_GUARDED_BY(mu);
    std::vector<std::string> unreferenced ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<ActorLifetimes> lifetimes_ = std::make_shared<ActorLifetimes>();
  // Ends the actors whose handles all went (the reaper's round).
  void EndUnreferencedActors();

  // Forgets borrowers of this driver's objects that are gone.
  std::unique_ptr<BorrowerWatch> borrower_watch_;

  absl::Notification stop_reaper_;
  std::thread reaper_;
  // Keeps what this driver reserved alive at the head; nullptr without a head.
  std::unique_ptr<DriverKeepAlive> keepalive_;
  // Sends the runs of this driver's tasks to the head (timelines); nullptr without a head or
  // when not asked for.
  std::unique_ptr<TaskEventReporter> task_events_;
};

}  // namespace tessera::api
