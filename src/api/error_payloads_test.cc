#include "api/error_payloads.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace tessera::api {
namespace {

TEST(ErrorPayloadsTest, KindAndExceptionTravelWithTheStatus) {
  absl::Status status = WithException(
      WithErrorKind(absl::UnknownError("task f failed: ValueError: boom"), ErrorKind::kTaskError),
      "pickled", "Traceback...");
  EXPECT_EQ(status.message(), "task f failed: ValueError: boom");
  EXPECT_EQ(ErrorKindOf(status), "TASK_ERROR");
  EXPECT_EQ(ExceptionOf(status), "pickled");
  EXPECT_EQ(TracebackOf(status), "Traceback...");
}

TEST(ErrorPayloadsTest, AStatusWithoutPayloadsHasNone) {
  const absl::Status plain = absl::UnavailableError("gone");
  EXPECT_FALSE(ErrorKindOf(plain).has_value());
  EXPECT_FALSE(ExceptionOf(plain).has_value());
  EXPECT_FALSE(TracebackOf(plain).has_value());
  // An empty exception or traceback sets nothing.
  EXPECT_FALSE(ExceptionOf(WithException(plain, "", "")).has_value());
}

TEST(ErrorPayloadsTest, OkStaysOk) {
  EXPECT_TRUE(WithErrorKind(absl::OkStatus(), ErrorKind::kActorDied).ok());
  EXPECT_TRUE(WithContext(absl::OkStatus(), "prefix: ").ok());
}

TEST(ErrorPayloadsTest, ContextIsPrefixedAndPayloadsAreKept) {
  const absl::Status inner = WithException(
      WithErrorKind(absl::UnknownError("task g failed"), ErrorKind::kTaskError), "cause", "tb");
  const absl::Status outer = WithContext(inner, "task f: argument 0: ");
  EXPECT_EQ(outer.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(outer.message(), "task f: argument 0: task g failed");
  EXPECT_EQ(ErrorKindOf(outer), "TASK_ERROR");
  EXPECT_EQ(ExceptionOf(outer), "cause");
  EXPECT_EQ(TracebackOf(outer), "tb");
}

TEST(ErrorPayloadsTest, EveryKindHasItsOwnWord) {
  const ErrorKind kinds[] = {ErrorKind::kTaskError,
                             ErrorKind::kWorkerCrashed,
                             ErrorKind::kActorDied,
                             ErrorKind::kActorUnavailable,
                             ErrorKind::kTaskCancelled,
                             ErrorKind::kTaskUnschedulable,
                             ErrorKind::kActorUnschedulable,
                             ErrorKind::kObjectLost,
                             ErrorKind::kOwnerDied,
                             ErrorKind::kTaskPlacementGroupRemoved,
                             ErrorKind::kActorPlacementGroupRemoved};
  std::set<std::string_view> words;
  for (ErrorKind kind : kinds) words.insert(ErrorKindWord(kind));
  EXPECT_EQ(words.size(), std::size(kinds));
  EXPECT_EQ(words.count("SYSTEM"), 0u);
}

}  // namespace
}  // namespace tessera::api
