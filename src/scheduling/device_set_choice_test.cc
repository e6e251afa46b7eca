#include "scheduling/device_set_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace tessera {
namespace {

using ::testing::ElementsAre;

DeviceLink Link(int a, int b, LinkKind kind, int lanes, double gbps) {
  DeviceLink l;
  l.a = a;
  l.b = b;
  l.kind = kind;
  l.lanes = lanes;
  l.gigabytes_per_second = gbps;
  l.bandwidth_class = ClassifyBandwidth(gbps);
  return l;
}

// Every pair of devices in `members` joined by one link.
void AllToAll(const std::vector<int>& members, LinkKind kind, int lanes, double gbps,
              std::vector<DeviceLink>* links) {
  for (size_t i = 0; i < members.size(); ++i) {
    for (size_t j = i + 1; j < members.size(); ++j) {
      links->push_back(Link(members[i], members[j], kind, lanes, gbps));
    }
  }
}

DeviceTopology Empty(int count, std::vector<int> numa) {
  DeviceTopology t;
  t.count = count;
  t.numa_node = std::move(numa);
  t.nearest_nic.assign(count, "");
  return t;
}

// HGX H100 8-GPU: every pair through NVSwitch (18 NVLink4 lanes, 450 GB/s); GPUs 0-3 on NUMA
// node 0, 4-7 on node 1; one NIC per GPU.
DeviceTopology H100() {
  DeviceTopology t = Empty(8, {0, 0, 0, 0, 1, 1, 1, 1});
  for (int i = 0; i < 8; ++i) t.nearest_nic[i] = "mlx5_" + std::to_string(i);
  AllToAll({0, 1, 2, 3, 4, 5, 6, 7}, LinkKind::kNvSwitch, 18, 450, &t.links);
  return t;
}

// DGX-1 V100 hybrid cube-mesh (nvidia-smi topo -m): two fully linked quads 0-3 and 4-7 plus
// 0-4, 1-5, 2-6, 3-7; NV1 = one NVLink2 lane (25 GB/s, low), NV2 = two (50 GB/s, medium).
// GPUs 0-3 on NUMA node 0, 4-7 on node 1. NICs left unknown unless a test sets them.
DeviceTopology CubeMesh() {
  DeviceTopology t = Empty(8, {0, 0, 0, 0, 1, 1, 1, 1});
  const int nv[8][8] = {{0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0},
                        {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
                        {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
                        {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      if (nv[a][b] > 0) t.links.push_back(Link(a, b, LinkKind::kNvLink, nv[a][b], 25 * nv[a][b]));
    }
  }
  return t;
}

// 8x MI300X OAM: every pair by one XGMI link (64 GB/s, medium); GPUs 0-3 on NUMA 0, 4-7 on 1.
DeviceTopology Mi300x() {
  DeviceTopology t = Empty(8, {0, 0, 0, 0, 1, 1, 1, 1});
  AllToAll({0, 1, 2, 3, 4, 5, 6, 7}, LinkKind::kXgmi, 1, 64, &t.links);
  return t;
}

// A v6e 4-chip host: a 2x2 chip grid, ICI between grid neighbours (0-1, 2-3, 0-2, 1-3).
DeviceTopology TpuHost() {
  DeviceTopology t = Empty(4, {0, 0, 0, 0});
  for (auto [a, b] : std::vector<std::pair<int, int>>{{0, 1}, {2, 3}, {0, 2}, {1, 3}}) {
    t.links.push_back(Link(a, b, LinkKind::kIci, 4, 448));
  }
  return t;
}

// trn1.32xlarge-like: 16 Trainium chips in a NeuronLink ring, 2 NeuronCores each (cores 2c and
// 2c+1 on chip c). The two cores of a chip share its memory (820 GB/s, high); every core pair of
// two neighbouring chips has a NeuronLink (48 GB/s, low). Chips 0-7 on NUMA 0, 8-15 on NUMA 1.
DeviceTopology Trn1() {
  DeviceTopology t;
  t.count = 32;
  for (int core = 0; core < 32; ++core) t.numa_node.push_back(core / 16);
  t.nearest_nic.assign(32, "");
  for (int chip = 0; chip < 16; ++chip) {
    AllToAll({2 * chip, 2 * chip + 1}, LinkKind::kNeuronLink, 1, 820, &t.links);
    const int next = (chip + 1) % 16;
    for (int a : {2 * chip, 2 * chip + 1}) {
      for (int b : {2 * next, 2 * next + 1}) {
        t.links.push_back(Link(a, b, LinkKind::kNeuronLink, 1, 48));
      }
    }
  }
  return t;
}

// PCIe-only 8-GPU box: no accelerator links, GPUs 0-3 on NUMA 0 and 4-7 on NUMA 1.
DeviceTopology NoLinks() { return Empty(8, {0, 0, 0, 0, 1, 1, 1, 1}); }

std::vector<bool> FreeExcept(int count, std::set<int> busy) {
  std::vector<bool> free(count, true);
  for (int b : busy) free[b] = false;
  return free;
}

std::vector<int> Choose(const DeviceTopology& t, std::set<int> busy, int k) {
  return ChooseDeviceSet(t, FreeExcept(t.count, std::move(busy)), k);
}

// --- Basic contract -------------------------------------------------------------------------

TEST(ChooseDeviceSetTest, TooFewFreeOrNonPositiveKGivesNothing) {
  EXPECT_TRUE(Choose(H100(), {0, 1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(Choose(H100(), {}, 0).empty());
  EXPECT_TRUE(Choose(H100(), {}, -1).empty());
  EXPECT_TRUE(Choose(DeviceTopology(), {}, 1).empty());
}

TEST(ChooseDeviceSetTest, AllFreeDevicesWhenKEqualsFree) {
  EXPECT_THAT(Choose(H100(), {2, 5}, 6), ElementsAre(0, 1, 3, 4, 6, 7));
}

TEST(ChooseDeviceSetTest, ShortFreeVectorAndStrayLinksAreHarmless) {
  DeviceTopology t = H100();
  t.links.push_back(Link(3, 99, LinkKind::kNvLink, 1, 25));
  t.links.push_back(Link(-1, 2, LinkKind::kNvLink, 1, 25));
  t.numa_node.resize(3);
  t.nearest_nic.clear();
  // Only instances 0-2 are named free.
  EXPECT_THAT(ChooseDeviceSet(t, {true, true, true}, 2), ElementsAre(0, 1));
  EXPECT_TRUE(ChooseDeviceSet(t, {true, true, true}, 4).empty());
}

TEST(ChooseDeviceSetTest, H100NvSwitchTakesLowestIndicesInOneNumaNode) {
  EXPECT_THAT(Choose(H100(), {}, 1), ElementsAre(0));
  EXPECT_THAT(Choose(H100(), {}, 2), ElementsAre(0, 1));
  EXPECT_THAT(Choose(H100(), {}, 4), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Choose(H100(), {}, 8), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

// --- Criterion 1: min pairwise link class ---------------------------------------------------

// Cube-mesh: 0-1 is one NVLink lane, 0-3 two; the double-lane pair wins.
TEST(ChooseDeviceSetTest, CubeMeshPairTakesTheDoubleLanePair) {
  EXPECT_THAT(Choose(CubeMesh(), {}, 2), ElementsAre(0, 3));
}

// Issue 3's example: one GPU busy in quad A, a 4-GPU request takes quad B whole (the only four
// GPUs all directly linked), not the lowest free indices.
TEST(ChooseDeviceSetTest, CubeMeshFourTakesTheIntactQuad) {
  EXPECT_THAT(Choose(CubeMesh(), {3}, 4), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(Choose(CubeMesh(), {6}, 4), ElementsAre(0, 1, 2, 3));
}

// TPU 2x2 host: chips 1 and 2 are diagonal (no ICI link); never hand out a diagonal pair.
TEST(ChooseDeviceSetTest, TpuGridPairIsIciNeighbours) {
  EXPECT_THAT(Choose(TpuHost(), {}, 2), ElementsAre(0, 1));
  EXPECT_THAT(Choose(TpuHost(), {0}, 2), ElementsAre(1, 3));
  EXPECT_THAT(Choose(TpuHost(), {0}, 3), ElementsAre(1, 2, 3));
  EXPECT_THAT(Choose(TpuHost(), {}, 4), ElementsAre(0, 1, 2, 3));
}

// trn1: two cores of one chip beat two cores across a NeuronLink.
TEST(ChooseDeviceSetTest, NeuronPairIsOneChip) {
  EXPECT_THAT(Choose(Trn1(), {}, 2), ElementsAre(0, 1));
  EXPECT_THAT(Choose(Trn1(), {0}, 2), ElementsAre(2, 3));
}

// --- Criterion 2: islands spanned -----------------------------------------------------------

// Island A is the bridged pair {0,1}; island B a ring 2-3-4-5-2. With 1, 3 and 5 busy no free
// pair is linked; {2,4} stays inside island B although {0,2} is lower and, counted by cliques,
// less fragmenting.
TEST(ChooseDeviceSetTest, FewerIslandsWin) {
  DeviceTopology t = Empty(6, {0, 0, 0, 0, 0, 0});
  t.links.push_back(Link(0, 1, LinkKind::kNvLink, 4, 100));
  for (auto [a, b] : std::vector<std::pair<int, int>>{{2, 3}, {3, 4}, {4, 5}, {2, 5}}) {
    t.links.push_back(Link(a, b, LinkKind::kXgmi, 1, 64));
  }
  EXPECT_THAT(Choose(t, {1, 3, 5}, 2), ElementsAre(2, 4));
}

// --- Criterion 3: pieces (connectivity inside the set) --------------------------------------

// A ring of 8 (0-1-...-7-0) with 1 busy: three devices in a row ({0,6,7}), not {0,2,3}.
TEST(ChooseDeviceSetTest, ContiguousRingSegmentWins) {
  DeviceTopology t = Empty(8, std::vector<int>(8, 0));
  for (int i = 0; i < 8; ++i) t.links.push_back(Link(i, (i + 1) % 8, LinkKind::kNeuronLink, 1, 96));
  EXPECT_THAT(Choose(t, {1}, 3), ElementsAre(0, 6, 7));
}

// trn1, greedy search (C(32, 8) is large): 4 whole neighbouring chips on one NUMA node.
TEST(ChooseDeviceSetTest, NeuronEightAndSixteenAreContiguousChips) {
  EXPECT_THAT(Choose(Trn1(), {}, 8), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  std::vector<int> sixteen(16);
  for (int i = 0; i < 16; ++i) sixteen[i] = i;
  EXPECT_EQ(Choose(Trn1(), {}, 16), sixteen);
  // Chip 2 busy: 4 whole neighbouring chips on NUMA node 0 past it.
  EXPECT_THAT(Choose(Trn1(), {4, 5}, 8), ElementsAre(6, 7, 8, 9, 10, 11, 12, 13));
}

// --- Criterion 4: NUMA nodes ----------------------------------------------------------------

TEST(ChooseDeviceSetTest, OneNumaNodeBeatsLowerIndices) {
  EXPECT_THAT(Choose(H100(), {1}, 4), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(Choose(Mi300x(), {1}, 4), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(Choose(NoLinks(), {0}, 4), ElementsAre(4, 5, 6, 7));
}

// --- Criterion 5: NICs ----------------------------------------------------------------------

TEST(ChooseDeviceSetTest, SharedNicBeatsLowerIndices) {
  DeviceTopology t = Empty(8, std::vector<int>(8, 0));
  for (int i = 0; i < 8; ++i) t.nearest_nic[i] = "mlx5_" + std::to_string(i / 2);
  EXPECT_THAT(Choose(t, {0}, 2), ElementsAre(2, 3));
}

// With DGX-1's real NIC layout (one per GPU pair) the shared NIC outranks fragmentation: with 3
// busy a pair takes 6-7 (NV2, one NIC) rather than 1-2 (NV2, two NICs).
TEST(ChooseDeviceSetTest, CubeMeshWithNicsPrefersPairBehindOneNic) {
  DeviceTopology t = CubeMesh();
  for (int i = 0; i < 8; ++i) t.nearest_nic[i] = "mlx5_" + std::to_string(i / 2);
  EXPECT_THAT(Choose(t, {3}, 2), ElementsAre(6, 7));
}

// --- Criterion 6: fragmentation -------------------------------------------------------------

// Two NVSwitch islands of 4 (no links between them), GPU 4 busy in island B.
DeviceTopology TwoSwitchIslands() {
  DeviceTopology t = Empty(8, std::vector<int>(8, 0));
  AllToAll({0, 1, 2, 3}, LinkKind::kNvSwitch, 18, 450, &t.links);
  AllToAll({4, 5, 6, 7}, LinkKind::kNvSwitch, 18, 450, &t.links);
  return t;
}

TEST(ChooseDeviceSetTest, SmallRequestsGoIntoTheBrokenIsland) {
  EXPECT_THAT(Choose(TwoSwitchIslands(), {4}, 1), ElementsAre(5));
  EXPECT_THAT(Choose(TwoSwitchIslands(), {4}, 2), ElementsAre(5, 6));
  EXPECT_THAT(Choose(TwoSwitchIslands(), {4}, 3), ElementsAre(5, 6, 7));
  EXPECT_THAT(Choose(TwoSwitchIslands(), {4}, 4), ElementsAre(0, 1, 2, 3));
}

// Cube-mesh with GPU 7 busy: one GPU goes to quad B (4, not 0); a pair takes a double-lane pair
// inside quad B (5-6) and leaves quad A whole.
TEST(ChooseDeviceSetTest, CubeMeshSmallRequestsGoIntoTheBrokenQuad) {
  EXPECT_THAT(Choose(CubeMesh(), {7}, 1), ElementsAre(4));
  EXPECT_THAT(Choose(CubeMesh(), {7}, 2), ElementsAre(5, 6));
  EXPECT_THAT(Choose(CubeMesh(), {7}, 4), ElementsAre(0, 1, 2, 3));
}

// k == 1 with no links: the NUMA node with the fewest free devices.
TEST(ChooseDeviceSetTest, SingleDeviceOnTheFullerNumaNode) {
  EXPECT_THAT(Choose(NoLinks(), {5}, 1), ElementsAre(4));
  EXPECT_THAT(Choose(NoLinks(), {5}, 2), ElementsAre(4, 6));
  EXPECT_THAT(Choose(H100(), {5}, 1), ElementsAre(4));
  EXPECT_THAT(Choose(Mi300x(), {5}, 2), ElementsAre(4, 6));
}

// trn1: one core goes next to a busy core on a broken chip, not onto a whole chip.
TEST(ChooseDeviceSetTest, NeuronSingleCoreFillsTheBrokenChip) {
  EXPECT_THAT(Choose(Trn1(), {5}, 1), ElementsAre(4));
  EXPECT_THAT(Choose(Trn1(), {0, 5}, 1), ElementsAre(1));
}

// --- Search -----------------------------------------------------------------------------------

std::vector<int> Greedy(const DeviceTopology& t, std::set<int> busy, int k) {
  return ChooseDeviceSet(t, FreeExcept(t.count, std::move(busy)), k,
                         DeviceSetChoiceOptions{.exhaustive_limit = 0});
}
std::vector<int> Exhaustive(const DeviceTopology& t, std::set<int> busy, int k) {
  return ChooseDeviceSet(t, FreeExcept(t.count, std::move(busy)), k,
                         DeviceSetChoiceOptions{.exhaustive_limit = int64_t{1} << 40});
}

// The greedy search finds a set as good as the exhaustive one on criteria 1-6 (it may lose
// only the final index tie-break: cube-mesh, GPU 1 busy, k=5 gives {0,4,5,6,7}, which ties
// with the exhaustive {0,2,3,4,5} on every criterion but the indices).
TEST(ChooseDeviceSetTest, GreedyAgreesWithExhaustiveOnRealTopologies) {
  for (const DeviceTopology& t : {H100(), CubeMesh(), Mi300x(), NoLinks(), TwoSwitchIslands()}) {
    for (int k = 1; k <= 7; ++k) {
      for (int busy = 0; busy < 8; ++busy) {
        SCOPED_TRACE(testing::Message() << "k=" << k << " busy=" << busy);
        const std::vector<int> greedy = Greedy(t, {busy}, k);
        const std::vector<int> exhaustive = Exhaustive(t, {busy}, k);
        EXPECT_EQ(greedy.size(), static_cast<size_t>(k));
        EXPECT_EQ(CompareDeviceSets(t, FreeExcept(8, {busy}), greedy, exhaustive), 0)
            << ::testing::PrintToString(greedy) << " vs " << ::testing::PrintToString(exhaustive);
      }
    }
  }
  EXPECT_THAT(Greedy(CubeMesh(), {1}, 5), ElementsAre(0, 4, 5, 6, 7));
  EXPECT_THAT(Exhaustive(CubeMesh(), {1}, 5), ElementsAre(0, 2, 3, 4, 5));
  EXPECT_EQ(Greedy(Trn1(), {0}, 4), Exhaustive(Trn1(), {0}, 4));
  EXPECT_EQ(Greedy(Trn1(), {0}, 4), std::vector<int>({2, 3, 4, 5}));
}

// 32 devices, all-to-all (496 links), two NUMA nodes: the greedy search stays in one node.
TEST(ChooseDeviceSetTest, LargeAllToAllNode) {
  DeviceTopology t;
  t.count = 32;
  for (int i = 0; i < 32; ++i) t.numa_node.push_back(i / 16);
  std::vector<int> all(32);
  for (int i = 0; i < 32; ++i) all[i] = i;
  AllToAll(all, LinkKind::kGaudiRoce, 3, 300, &t.links);
  std::vector<int> low(all.begin(), all.begin() + 16), high(all.begin() + 16, all.end());
  EXPECT_EQ(Choose(t, {}, 16), low);
  EXPECT_EQ(Choose(t, {0}, 16), high);
}

// --- Determinism --------------------------------------------------------------------------------

TEST(ChooseDeviceSetTest, SameAnswerForAnyLinkOrder) {
  DeviceTopology forward = Trn1();
  DeviceTopology reversed = forward;
  std::reverse(reversed.links.begin(), reversed.links.end());
  for (DeviceLink& l : reversed.links) std::swap(l.a, l.b);
  for (int k : {1, 2, 3, 4, 6, 8, 12, 16}) {
    SCOPED_TRACE(k);
    const std::vector<int> first = Choose(forward, {5, 17}, k);
    EXPECT_EQ(first, Choose(forward, {5, 17}, k));
    EXPECT_EQ(first, Choose(reversed, {5, 17}, k));
  }
}

TEST(CompareDeviceSetsTest, OrdersByTheDocumentedCriteria) {
  const std::vector<bool> all = FreeExcept(8, {});
  EXPECT_LT(CompareDeviceSets(CubeMesh(), all, {0, 3}, {0, 1}), 0);  // NV2 beats NV1
  EXPECT_GT(CompareDeviceSets(CubeMesh(), all, {0, 5}, {0, 1}), 0);  // unlinked loses
  EXPECT_LT(CompareDeviceSets(NoLinks(), all, {0, 1}, {0, 4}), 0);   // one NUMA node
  EXPECT_EQ(CompareDeviceSets(H100(), all, {0, 1}, {2, 3}), 0);      // only indices differ
  EXPECT_EQ(CompareDeviceSets(H100(), all, {1, 0}, {0, 1}), 0);      // order does not matter
}

// --- BestFitFraction ----------------------------------------------------------------------------

Quantity Q(std::string_view text) { return *Quantity::Parse(text); }

TEST(BestFitFractionTest, PacksHalvesOntoOneDeviceBeforeOpeningAnother) {
  std::vector<Quantity> available = {Q("1"), Q("1")};
  EXPECT_EQ(BestFitFraction(available, Q("0.5")), 0);
  available[0] = Q("0.5");
  EXPECT_EQ(BestFitFraction(available, Q("0.5")), 0);
  available[0] = Q("0");
  EXPECT_EQ(BestFitFraction(available, Q("0.5")), 1);
}

TEST(BestFitFractionTest, TightestFitWins) {
  EXPECT_EQ(BestFitFraction({Q("1"), Q("0.4")}, Q("0.3")), 1);
  EXPECT_EQ(BestFitFraction({Q("0.4"), Q("0.3"), Q("1")}, Q("0.3")), 1);  // exact fit
}

TEST(BestFitFractionTest, TiesGoToTheLowestIndex) {
  EXPECT_EQ(BestFitFraction({Q("1"), Q("0.5"), Q("0.5")}, Q("0.5")), 1);
}

TEST(BestFitFractionTest, NothingFitsOrDemandOutOfRange) {
  EXPECT_EQ(BestFitFraction({Q("0.2"), Q("0.1")}, Q("0.3")), -1);
  EXPECT_EQ(BestFitFraction({}, Q("0.3")), -1);
  EXPECT_EQ(BestFitFraction({Q("1")}, Q("1")), -1);
  EXPECT_EQ(BestFitFraction({Q("1")}, Q("0")), -1);
  EXPECT_EQ(BestFitFraction({Q("1")}, Quantity::FromRaw(-5000)), -1);
}

}  // namespace
}  // namespace tessera
