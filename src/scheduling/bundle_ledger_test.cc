#include "scheduling/bundle_ledger.h"

#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;
using testing_util::TwoIslands;

const Quantity kOne = Quantity::FromInt(1);

Quantity Q(std::string_view text) { return *Quantity::Parse(text); }

// A node with two NVLink islands {0..3} and {4..7}; reservations are taken from it exactly.
class BundleLedgerTest : public ::testing::Test {
 protected:
  BundleLedgerTest() : ledger_(&view_) {
    node_ = MustAdd(view_, Spec("n0", "CPU=16,GPU=8", {}, TwoIslands()));
  }

  Allocation Reserve(std::string_view resources, std::vector<int> gpus,
                     std::vector<Quantity> amounts = {}) {
    if (amounts.empty()) amounts.assign(gpus.size(), kOne);
    std::vector<DeviceGrant> grants;
    if (!gpus.empty()) grants.push_back(DeviceGrant{"GPU", gpus, amounts});
    absl::StatusOr<Allocation> a = view_.AllocateExact(node_, Res(resources), grants);
    EXPECT_TRUE(a.ok()) << a.status();
    return *a;
  }

  std::vector<int> Gpus(const ScheduleResult& r) {
    EXPECT_EQ(r.status, ScheduleStatus::kPlaced) << r.explanation;
    if (!r.placement || r.placement->allocation.devices.empty()) return {};
    return r.placement->allocation.devices[0].instances;
  }

  ClusterView view_;
  BundleLedger ledger_;
  NodeIndex node_ = -1;
};

TEST_F(BundleLedgerTest, ServesATargetedBundleWithItsBestConnectedDevices) {
  // The bundle holds two devices of each island; a 2-device request takes one island's pair.
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, Reserve("CPU=4,GPU=4", {0, 1, 4, 5})).ok());
  const ResourceSet view_before = view_.node(node_).available;
  ScheduleResult first =
      ledger_.Allocate({"pg", 0}, Res("CPU=1,GPU=2"), {HolderKind::kTask, "rank0"});
  EXPECT_THAT(Gpus(first), ElementsAre(0, 1));
  EXPECT_EQ(first.placement->bundle, 0);
  EXPECT_EQ(first.placement->node.value(), "n0");
  ScheduleResult second = ledger_.Allocate({"pg", 0}, Res("CPU=1,GPU=2"));
  // Named later, as a node agent names a lease once it has its id.
  ASSERT_TRUE(ledger_.SetHolder(second.placement->allocation.id, {HolderKind::kLease, "l-1"}).ok());
  EXPECT_EQ(ledger_.SetHolder(AllocationId(999), {HolderKind::kLease, "x"}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(Gpus(second), ElementsAre(4, 5));
  // Nothing left: pending, with what is left and who holds the rest.
  ScheduleResult third = ledger_.Allocate({"pg", 0}, Res("GPU=1"));
  EXPECT_EQ(third.status, ScheduleStatus::kPending);
  EXPECT_EQ(third.explanation,
            "not enough left now for GPU=1: bundle 0 of pg has GPU 0 of 4 left (held by task "
            "rank0, lease l-1)");
  // The cluster view is never touched: the reservation already counts as used.
  EXPECT_EQ(view_.node(node_).available, view_before);
  EXPECT_EQ(*ledger_.RemainingOf("pg", 0), Res("CPU=2,GPU=0"));
}

TEST_F(BundleLedgerTest, AnyBundleTakesTheFirstThatHoldsTheWholeDemandAndNeverSpans) {
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, Reserve("CPU=1,GPU=2", {0, 1})).ok());
  ASSERT_TRUE(ledger_.AddBundle("pg", 1, Reserve("CPU=1,GPU=2", {4, 5})).ok());
  ScheduleResult one = ledger_.Allocate({"pg", -1}, Res("GPU=1"));
  EXPECT_THAT(Gpus(one), ElementsAre(0));
  EXPECT_EQ(one.placement->bundle, 0);
  // Bundle 0 has one device left; two devices go to bundle 1 whole.
  ScheduleResult two = ledger_.Allocate({"pg", -1}, Res("GPU=2"));
  EXPECT_THAT(Gpus(two), ElementsAre(4, 5));
  EXPECT_EQ(two.placement->bundle, 1);
  // One device is left in bundle 0 and none in bundle 1: GPU=2 is never split across them.
  ScheduleResult spans = ledger_.Allocate({"pg", -1}, Res("GPU=2"));
  EXPECT_EQ(spans.status, ScheduleStatus::kPending);
  EXPECT_EQ(spans.explanation,
            "not enough left now for GPU=2: bundle 0 of pg has GPU 1 of 2 left (held by other "
            "work); bundle 1 of pg has GPU 0 of 2 left (held by other work)");
  ScheduleResult fits = ledger_.Allocate({"pg", -1}, Res("GPU=1"));
  EXPECT_THAT(Gpus(fits), ElementsAre(1));
}

TEST_F(BundleLedgerTest, FractionsBestFitInsideTheBundleAndWholeDevicesNeedUntouchedOnes) {
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, Reserve("GPU=2", {2, 3})).ok());
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.5"))), ElementsAre(2));
  // Best fit: the device with the least room that still fits, i.e. the half-used one.
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.25"))), ElementsAre(2));
  // A whole device must be untouched: only 3 is.
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=1"))), ElementsAre(3));
  ScheduleResult whole = ledger_.Allocate({"pg", 0}, Res("GPU=1"));
  EXPECT_EQ(whole.status, ScheduleStatus::kPending);
  EXPECT_EQ(whole.explanation,
            "not enough left now for GPU=1: bundle 0 of pg has GPU 0.25 of 2 left (held by other "
            "work)");
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.25"))), ElementsAre(2));
}

TEST_F(BundleLedgerTest, EnoughInTotalIsNotEnoughWithoutAnUntouchedDevice) {
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, Reserve("GPU=2", {2, 3})).ok());
  ASSERT_EQ(ledger_.Allocate({"pg", 0}, Res("GPU=0.5")).status, ScheduleStatus::kPlaced);
  ASSERT_EQ(ledger_.Allocate({"pg", 0}, Res("GPU=0.5")).status, ScheduleStatus::kPlaced);
  // Best fit put both halves on device 2; device 3 is whole.
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.25"))), ElementsAre(3));
  // 0.75 is left in total, on device 3: a whole device is not.
  ScheduleResult whole = ledger_.Allocate({"pg", 0}, Res("GPU=0.5"));
  EXPECT_THAT(Gpus(whole), ElementsAre(3));
  ScheduleResult none = ledger_.Allocate({"pg", 0}, Res("GPU=0.5"));
  EXPECT_EQ(none.status, ScheduleStatus::kPending);
  EXPECT_EQ(none.explanation,
            "not enough left now for GPU=0.5: bundle 0 of pg has GPU 0.25 of 2 left (held by other "
            "work)");
}

TEST_F(BundleLedgerTest, WholeDeviceShortfallIsNamedWhenTheAmountWouldFit) {
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, Reserve("GPU=3", {1, 2, 3})).ok());
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.5"))), ElementsAre(1));
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.75"))), ElementsAre(2));
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.75"))), ElementsAre(3));
  // One whole GPU's worth is left in total (0.5 + 0.25 + 0.25), but on no single device.
  ScheduleResult whole = ledger_.Allocate({"pg", 0}, Res("GPU=1"));
  EXPECT_EQ(whole.status, ScheduleStatus::kPending);
  EXPECT_EQ(whole.explanation,
            "not enough left now for GPU=1: bundle 0 of pg has 0 whole GPU left (held by other "
            "work)");
}

TEST_F(BundleLedgerTest, AFractionalReservationCanNeverHoldAWholeDevice) {
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, Reserve("GPU=0.5", {6}, {Q("0.5")})).ok());
  ScheduleResult whole = ledger_.Allocate({"pg", 0}, Res("GPU=0.5,CPU=1"));
  EXPECT_EQ(whole.status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(whole.explanation, "bundle 0 of pg reserves GPU=0.5; it can never hold CPU=1,GPU=0.5");
  EXPECT_EQ(ledger_.Allocate({"pg", 0}, Res("GPU=1")).status, ScheduleStatus::kInfeasible);
  EXPECT_THAT(Gpus(ledger_.Allocate({"pg", 0}, Res("GPU=0.25"))), ElementsAre(6));
}

TEST_F(BundleLedgerTest, InfeasibleAndNotReservedAreTold) {
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, Reserve("CPU=1,GPU=1", {0})).ok());
  ASSERT_TRUE(ledger_.AddBundle("pg", 2, Reserve("CPU=1,GPU=1", {1})).ok());
  ScheduleResult big = ledger_.Allocate({"pg", -1}, Res("GPU=2"));
  EXPECT_EQ(big.status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(big.explanation, "no bundle of pg can ever hold GPU=2 (a request never spans bundles)");
  ScheduleResult missing = ledger_.Allocate({"pg", 1}, Res("GPU=1"));
  EXPECT_EQ(missing.status, ScheduleStatus::kPending);
  EXPECT_EQ(missing.explanation, "bundle 1 of pg is not reserved now");
  ScheduleResult unknown = ledger_.Allocate({"other", -1}, Res("GPU=1"));
  EXPECT_EQ(unknown.status, ScheduleStatus::kPending);
  EXPECT_EQ(unknown.explanation, "placement group other has no bundle reserved now");
  EXPECT_THAT(ledger_.BundlesOf("pg"), ElementsAre(0, 2));
  EXPECT_EQ(ledger_.AddBundle("pg", 0, Allocation{}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ledger_.AddBundle("", 0, Allocation{}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger_.AddBundle("pg", -1, Allocation{}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BundleLedgerTest, ReleaseReturnsExactlyAndRemovingABundleReportsItsWork) {
  const Allocation reservation = Reserve("CPU=2,GPU=2", {0, 1});
  ASSERT_TRUE(ledger_.AddBundle("pg", 0, reservation).ok());
  ASSERT_TRUE(ledger_.AddBundle("pg", 1, Reserve("CPU=2", {})).ok());
  ScheduleResult a = ledger_.Allocate({"pg", 0}, Res("CPU=1,GPU=1"));
  ScheduleResult b = ledger_.Allocate({"pg", 0}, Res("GPU=0.5"));
  ScheduleResult c = ledger_.Allocate({"pg", 1}, Res("CPU=1"));
  ASSERT_EQ(c.status, ScheduleStatus::kPlaced);
  absl::StatusOr<Allocation> back = ledger_.Release(a.placement->allocation.id);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, a.placement->allocation);
  EXPECT_EQ(ledger_.Release(a.placement->allocation.id).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*ledger_.RemainingOf("pg", 0), Res("CPU=2,GPU=1.5"));
  EXPECT_EQ(ledger_.ReservationOf("pg", 0), reservation.id);
  // Bundle 0 goes (its node failed): the work it served is reported, bundle 1 keeps its own.
  std::vector<Allocation> lost = ledger_.RemoveBundles("pg", 0);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0], b.placement->allocation);
  EXPECT_EQ(ledger_.Release(b.placement->allocation.id).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ledger_.Allocate({"pg", 0}, Res("CPU=1")).status, ScheduleStatus::kPending);
  EXPECT_THAT(ledger_.BundlesOf("pg"), ElementsAre(1));
  // The whole group goes: bundle 1's request is reported too.
  lost = ledger_.RemoveBundles("pg", std::nullopt);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0], c.placement->allocation);
  EXPECT_THAT(ledger_.BundlesOf("pg"), IsEmpty());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Random serve/release/remove sequences: a bundle never serves more than it reserves (in total
// or on any device), devices are only its own, and what is left plus what is served is always
// exactly the reservation.
TEST(BundleLedgerPropertyTest, NeverServesMoreThanTheReservation) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    ClusterView view;
    const NodeIndex node = testing_util::MustAdd(
        view, testing_util::Spec("n0", "CPU=64,GPU=8", {}, testing_util::TwoIslands()));
    BundleLedger ledger(&view);
    std::map<int, Allocation> reservations;
    for (int b = 0; b < 3; ++b) {
      const int gpus = 1 + static_cast<int>(rng() % 2);
      absl::StatusOr<Allocation> r =
          view.Allocate(node, testing_util::Res(absl::StrCat("CPU=4,GPU=", gpus)));
      ASSERT_TRUE(r.ok());
      ASSERT_TRUE(ledger.AddBundle("pg", b, *r).ok());
      reservations[b] = *r;
    }
    std::vector<std::pair<int, Allocation>> held;  // (bundle, what it serves)
    const std::vector<std::string> demands = {"CPU=1",          "GPU=1", "GPU=0.5",
                                              "GPU=0.25,CPU=1", "GPU=2", "CPU=3,GPU=1"};
    for (int step = 0; step < 200; ++step) {
      if (rng() % 10 < 6) {
        const int target = static_cast<int>(rng() % 4) - 1;
        ScheduleResult r = ledger.Allocate(BundleTarget{"pg", target},
                                           testing_util::Res(demands[rng() % demands.size()]));
        if (r.status == ScheduleStatus::kPlaced) {
          if (target >= 0) {
            EXPECT_EQ(r.placement->bundle, target);
          }
          held.emplace_back(r.placement->bundle, r.placement->allocation);
        }
      } else if (!held.empty()) {
        const size_t i = rng() % held.size();
        ASSERT_TRUE(ledger.Release(held[i].second.id).ok());
        held.erase(held.begin() + static_cast<long>(i));
      }
      for (const auto& [b, reservation] : reservations) {
        ResourceSet sum = *ledger.RemainingOf("pg", b);
        std::map<int, int64_t> per_device;  // the bundle's own devices: reserved minus served
        for (const DeviceGrant& g : reservation.devices) {
          for (size_t i = 0; i < g.instances.size(); ++i) {
            per_device[g.instances[i]] += g.amounts[i].raw();
          }
        }
        for (const auto& [served_by, a] : held) {
          if (served_by != b) continue;
          sum = *sum.Plus(a.resources);
          for (const DeviceGrant& g : a.devices) {
            for (size_t i = 0; i < g.instances.size(); ++i) {
              ASSERT_TRUE(per_device.contains(g.instances[i]))
                  << "seed " << seed << ": bundle " << b << " served a device it does not hold";
              per_device[g.instances[i]] -= g.amounts[i].raw();
            }
          }
        }
        EXPECT_EQ(sum, reservation.resources) << "seed " << seed << " bundle " << b;
        for (const auto& [instance, left] : per_device) {
          EXPECT_GE(left, 0) << "seed " << seed << " bundle " << b << " GPU " << instance;
        }
      }
    }
    // Releasing everything restores every bundle exactly.
    for (const auto& [b, a] : held) ASSERT_TRUE(ledger.Release(a.id).ok());
    for (const auto& [b, reservation] : reservations) {
      EXPECT_EQ(*ledger.RemainingOf("pg", b), reservation.resources) << "seed " << seed;
    }
  }
}

}  // namespace
}  // namespace tessera
