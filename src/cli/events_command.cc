// tessera events [--follow] [--after SEQ] [--json]
// The head's event stream (HeadJobs.ListEvents): nodes joining and lost, reservations made, held,
// lost and removed, jobs starting and ending, gang ranks failing and restarting, drivers gone,
// oldest first, one line each in local time; a notice (what `tessera status` also shows) is
// marked "!":
//   2026-12-02 01:20:00  node         node n1 joined (agent at 10.0.0.5:7001): CPU=8
//   2026-12-02 01:21:40  node       ! node n1 declared dead: no heartbeat for 10s
// --follow keeps printing new events as the head records them (every second) until interrupted;
// --json prints each event as one JSON object per line (seq, time_ms, kind, message, notice).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/cluster_args.h"
#include "cli/commands.h"
#include "client/cluster_client.h"
#include "rpc/message_json.h"

namespace tessera::cli {
namespace {

struct EventsArgs {
  CommonClusterArgs common;
  bool follow = false;
  bool json = false;
  int64_t after = 0;
};

int RunEvents(const EventsArgs& args) {
  auto client = ConnectCluster(args.common);
  if (!client.ok()) return ReportError(client.status());
  int64_t after = args.after;
  const absl::TimeZone zone = absl::LocalTimeZone();
  while (true) {
    auto events = (*client)->ListEvents(after);
    if (!events.ok()) return ReportError(events.status());
    for (const tessera::v1::HeadEventInfo& event : events->events()) {
      if (args.json) {
        std::cout << rpc::MessageJson(event).dump() << "\n";
      } else {
        std::cout << absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(event.time_ms()),
                                      zone)
                  << "  " << absl::StrFormat("%-11s", event.kind())
                  << (event.notice() ? "! " : "  ") << event.message() << "\n";
      }
    }
    std::cout.flush();
    after = events->next();
    // A full page: more wait at once. Otherwise, with --follow, look again in a second.
    if (events->events_size() >= 1000) continue;
    if (!args.follow) return 0;
    absl::SleepFor(absl::Seconds(1));
  }
}

}  // namespace

void AddEventsCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<EventsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "events",
      "The cluster's events: nodes, reservations, jobs, gangs, drivers (! marks a notice)");
  cmd->add_flag("--follow,-f", args->follow, "Keep printing new events until interrupted");
  cmd->add_option("--after", args->after, "Only events after this sequence number")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json, "One JSON object per event and line, for programs");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->callback([args, &exit_code] { exit_code = RunEvents(*args); });
}

}  // namespace tessera::cli
