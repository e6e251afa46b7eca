// Walking every page of one of the head's List* calls (ListNodes, ListPlacementGroups,
// ListSlices, ListJobs): each call answers one page and a next_page_token (proto
// tessera/v1/head.proto, ListRequest). Every caller that needs all items goes through
// ListEveryPage: ClusterClient's listings (with its retries per page), and through
// ListEveryPageOf the callers that hold a bare stub of one of the head's services (src/api,
// src/objects):
//
//   auto nodes = client::ListEveryPageOf(*nodes_stub, &v1::HeadNodes::Stub::ListNodes,
//                                        absl::Seconds(5), "the head at 10.0.0.1:6380");
//
// Thread-compatible: no state of its own; `fetch` is called from the calling thread only.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/string_util.h"
#include "rpc/auth.h"
#include "rpc/status_conversion.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::client {

// Every page of one listing merged into one response: repeated fields appended in page order,
// next_page_token cleared. `fetch(request, page)` asks for one page (absl::Status); its error
// ends the walk with that error. Pages are asked with page_size 0, the head's largest page.
// A head that answers a page token it already answered once would loop forever: that is an
// Internal error naming `peer` and the token.
template <typename Response, typename Fetch>
absl::StatusOr<Response> ListEveryPage(std::string_view peer, Fetch&& fetch) {
  Response all;
  tessera::v1::ListRequest request;
  std::set<std::string> tokens;
  while (true) {
    Response page;
    if (absl::Status status = fetch(static_cast<const tessera::v1::ListRequest&>(request), &page);
        !status.ok()) {
      return status;
    }
    std::string next = page.next_page_token();
    all.MergeFrom(page);
    all.clear_next_page_token();
    if (next.empty()) return all;
    if (!tokens.insert(next).second) {
      return absl::InternalError(absl::StrCat(ToAbsl(peer), " returned the page token ",
                                              Quote(next), " twice; the listing stops there"));
    }
    request.set_page_token(std::move(next));
  }
}

// ListEveryPage over a bare stub of any of the head's services (HeadNodes, HeadReservations,
// HeadActors, HeadJobs): each page is one call of `method` (e.g. &v1::HeadNodes::Stub::ListNodes)
// with a fresh context carrying a `per_page` deadline, not retried (the caller tries again later,
// as it would after a failed single call).
template <typename Response, typename Stub>
absl::StatusOr<Response> ListEveryPageOf(
    Stub& stub,
    grpc::Status (Stub::*method)(grpc::ClientContext*, const tessera::v1::ListRequest&, Response*),
    absl::Duration per_page, std::string_view peer) {
  return ListEveryPage<Response>(
      peer, [&](const tessera::v1::ListRequest& request, Response* page) {
        grpc::ClientContext context;
        rpc::ConfigureClientContext(&context, per_page);
        return rpc::FromGrpcStatus((stub.*method)(&context, request, page));
      });
}

}  // namespace tessera::client
