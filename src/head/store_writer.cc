#include "head/store_writer.h"

#include "absl/strings/str_cat.h"
#include "base/log_line.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera {

absl::StatusOr<StateStoreMetrics> StateStoreMetrics::Register(metrics::MetricRegistry& registry) {
  TESSERA_ASSIGN_OR_RETURN(
      metrics::GaugeFamily * healthy,
      registry.AddGauge({.name = "tessera_head_state_store_healthy",
                         .help = "1 while the head's writes reach its state store, 0 while it is "
                                 "degraded (reservations, removals and submissions are refused).",
                         .label_names = {}}));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::GaugeFamily * pending,
      registry.AddGauge({.name = "tessera_head_state_store_pending_writes",
                         .help = "Writes the head made on its own while its state store was "
                                 "degraded, kept to be made when it is back (one per key).",
                         .label_names = {}}));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CounterFamily * failed,
      registry.AddCounter({.name = "tessera_head_state_store_failed_writes_total",
                           .help = "Writes the head's state store failed to make.",
                           .label_names = {}}));
  StateStoreMetrics out;
  TESSERA_ASSIGN_OR_RETURN(out.healthy, healthy->WithLabels({}));
  TESSERA_ASSIGN_OR_RETURN(out.pending, pending->WithLabels({}));
  TESSERA_ASSIGN_OR_RETURN(out.failed_writes, failed->WithLabels({}));
  out.healthy->Set(1);
  return out;
}

StoreWriter::StoreWriter(StateStore* store, EventLog* events, StateStoreMetrics metrics)
    : store_(store), events_(events), metrics_(metrics) {
  if (metrics_.healthy != nullptr) metrics_.healthy->Set(1);
}

absl::Status StoreWriter::Refusal() const {
  return absl::UnavailableError(
      absl::StrCat(ToAbsl(kStoreUnavailable), cause_, "; nothing was changed"));
}

absl::Status StoreWriter::Writable() const {
  absl::MutexLock lock(&mu_);
  return degraded_ ? Refusal() : absl::OkStatus();
}

absl::Status StoreWriter::Write(std::string_view table, std::string_view key,
                                std::string_view value) {
  absl::MutexLock lock(&mu_);
  if (degraded_) return Refusal();
  if (absl::Status put = store_->Put(table, key, value); !put.ok()) {
    Failed("write", table, key, put);
    return Refusal();
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> StoreWriter::Erase(std::string_view table, std::string_view key) {
  absl::MutexLock lock(&mu_);
  if (degraded_) return Refusal();
  absl::StatusOr<bool> deleted = store_->Delete(table, key);
  if (!deleted.ok()) {
    Failed("delete", table, key, deleted.status());
    return Refusal();
  }
  return *deleted;
}

void StoreWriter::Put(std::string_view table, std::string_view key, std::string_view value) {
  absl::MutexLock lock(&mu_);
  if (degraded_) {
    Keep(table, key, std::string(value));
    return;
  }
  if (absl::Status put = store_->Put(table, key, value); !put.ok()) {
    Failed("write", table, key, put);
    Keep(table, key, std::string(value));
  }
}

void StoreWriter::Delete(std::string_view table, std::string_view key) {
  absl::MutexLock lock(&mu_);
  if (degraded_) {
    Keep(table, key, std::nullopt);
    return;
  }
  if (absl::StatusOr<bool> deleted = store_->Delete(table, key); !deleted.ok()) {
    Failed("delete", table, key, deleted.status());
    Keep(table, key, std::nullopt);
  }
}

void StoreWriter::Keep(std::string_view table, std::string_view key,
                       std::optional<std::string> value) {
  pending_[Key(std::string(table), std::string(key))] = std::move(value);
  UpdateGauges();
}

void StoreWriter::Failed(std::string_view what, std::string_view table, std::string_view key,
                         const absl::Status& status) {
  ++failed_;
  if (metrics_.failed_writes != nullptr) metrics_.failed_writes->Increment();
  Degrade(absl::StrCat("could not ", ToAbsl(what), " ", ToAbsl(table), "/", ToAbsl(key), ": ",
                       status.message()));
}

void StoreWriter::Degrade(std::string cause) {
  const bool was_degraded = degraded_;
  degraded_ = true;
  cause_ = std::move(cause);
  UpdateGauges();
  if (was_degraded) return;
  const std::string line = absl::StrCat(
      "the state store is degraded: ", cause_,
      "; reservations, removals and submissions are refused until it is back, and the head's "
      "own writes are kept and made then");
  LogLine(absl::StrCat("head: ", line));
  events_->Record(line);
}

void StoreWriter::UpdateGauges() {
  if (metrics_.healthy != nullptr) metrics_.healthy->Set(degraded_ ? 0 : 1);
  if (metrics_.pending != nullptr) metrics_.pending->Set(static_cast<double>(pending_.size()));
}

void StoreWriter::CheckHealth() {
  {
    absl::MutexLock lock(&mu_);
    if (checking_) return;
    checking_ = true;
  }
  // Without the lock: a store that does not answer holds up no write while it is asked.
  const absl::Status ping = store_->Ping();
  absl::MutexLock lock(&mu_);
  checking_ = false;
  if (!ping.ok()) {
    Degrade(absl::StrCat("does not answer: ", ping.message()));
    return;
  }
  if (!degraded_) return;
  const size_t kept = pending_.size();
  for (auto it = pending_.begin(); it != pending_.end();) {
    const auto& [table, key] = it->first;
    absl::Status made;
    if (it->second.has_value()) {
      made = store_->Put(table, key, *it->second);
    } else {
      made = store_->Delete(table, key).status();
    }
    if (!made.ok()) {
      Failed(it->second.has_value() ? "write" : "delete", table, key, made);
      return;
    }
    it = pending_.erase(it);
    UpdateGauges();
  }
  degraded_ = false;
  cause_.clear();
  UpdateGauges();
  const std::string line =
      absl::StrCat("the state store is back: the ", kept,
                   " writes kept while it was degraded were made; writes are accepted again");
  LogLine(absl::StrCat("head: ", line));
  events_->Record(line);
}

void StoreWriter::MaybeCheckHealth(absl::Time now, absl::Duration interval) {
  {
    absl::MutexLock lock(&mu_);
    if (now - last_check_ < interval) return;
    last_check_ = now;
  }
  CheckHealth();
}

StateStoreHealth StoreWriter::health() const {
  absl::MutexLock lock(&mu_);
  return StateStoreHealth{degraded_, cause_, pending_.size(), failed_};
}

}  // namespace tessera
