#include "scheduling/device_set_choice.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

namespace tessera {
namespace {

// Link classes as small integers so "no link" sorts below kLow.
constexpr int kNoLink = -1;
// The min pairwise class of a set without pairs (one device): above every real class.
constexpr int kNoPairs = 3;

int ClassValue(BandwidthClass c) { return static_cast<int>(c); }

using Bits = std::vector<uint64_t>;

bool Test(const Bits& b, int i) { return (b[i / 64] >> (i % 64)) & 1; }
void SetBit(Bits& b, int i) { b[i / 64] |= uint64_t{1} << (i % 64); }
bool Empty(const Bits& b) {
  return std::all_of(b.begin(), b.end(), [](uint64_t w) { return w == 0; });
}
int CountAnd(const Bits& a, const Bits& b) {
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += __builtin_popcountll(a[i] & b[i]);
  return n;
}

// Maximal cliques (size >= 2) of an undirected graph by Bron-Kerbosch with pivoting; members
// ascending, discovery order deterministic (vertices visited in index order).
class CliqueFinder {
 public:
  CliqueFinder(int n, const std::vector<Bits>& adjacency) : n_(n), adjacency_(adjacency) {}

  std::vector<std::vector<int>> Find() {
    Bits p((n_ + 63) / 64, 0), x((n_ + 63) / 64, 0);
    for (int v = 0; v < n_; ++v) {
      if (!Empty(adjacency_[v])) SetBit(p, v);
    }
    std::vector<int> r;
    Expand(r, p, x);
    return std::move(cliques_);
  }

 private:
  void Expand(std::vector<int>& r, Bits p, Bits x) {
    if (static_cast<int>(cliques_.size()) >= kMaxCliquesPerLevel) return;
    if (Empty(p)) {
      if (Empty(x) && r.size() >= 2) {
        std::vector<int> clique = r;
        std::sort(clique.begin(), clique.end());
        cliques_.push_back(std::move(clique));
      }
      return;
    }
    // Pivot: the vertex of P or X with the most neighbours in P.
    int pivot = -1, best = -1;
    for (int u = 0; u < n_; ++u) {
      if (!Test(p, u) && !Test(x, u)) continue;
      const int c = CountAnd(p, adjacency_[u]);
      if (c > best) best = c, pivot = u;
    }
    for (int v = 0; v < n_; ++v) {
      if (!Test(p, v) || Test(adjacency_[pivot], v)) continue;
      Bits np(p.size()), nx(x.size());
      for (size_t i = 0; i < p.size(); ++i) {
        np[i] = p[i] & adjacency_[v][i];
        nx[i] = x[i] & adjacency_[v][i];
      }
      r.push_back(v);
      Expand(r, std::move(np), std::move(nx));
      r.pop_back();
      p[v / 64] &= ~(uint64_t{1} << (v % 64));
      SetBit(x, v);
    }
  }

  int n_;
  const std::vector<Bits>& adjacency_;
  std::vector<std::vector<int>> cliques_;
};

}  // namespace

// One fragmentation level: groups of devices.
struct device_set_choice_internal::GroupLevel {
  std::vector<std::vector<int>> groups;            // group -> members
  std::vector<std::vector<int>> groups_of_device;  // device -> group ids
};

// Everything about the node the scoring needs, computed once per topology.
struct device_set_choice_internal::Prepared {
  int n = 0;
  std::vector<int8_t> pair;  // n*n: best link class between two devices, kNoLink when none
  std::vector<int> island;   // device -> connected component of the link graph
  std::vector<int> numa;     // -1 unknown
  std::vector<int> nic;      // -1 unknown, else a dense id
  int numa_ids = 0;
  int nic_ids = 0;
  int island_ids = 0;
  std::vector<GroupLevel> levels;  // clique levels strongest class first, then NUMA

  int Pair(int a, int b) const { return pair[static_cast<size_t>(a) * n + b]; }
};

namespace {

using device_set_choice_internal::GroupLevel;
using device_set_choice_internal::Prepared;

// Per level, per group: free devices before the choice.
using FreeCounts = std::vector<std::vector<int>>;

int Find(std::vector<int>& parent, int v) {
  while (parent[v] != v) v = parent[v] = parent[parent[v]];
  return v;
}

GroupLevel MakeLevel(int n, std::vector<std::vector<int>> groups) {
  GroupLevel level;
  level.groups_of_device.resize(n);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int d : groups[g]) level.groups_of_device[d].push_back(static_cast<int>(g));
  }
  level.groups = std::move(groups);
  return level;
}

FreeCounts CountFree(const Prepared& p, const std::vector<bool>& is_free) {
  FreeCounts counts;
  counts.reserve(p.levels.size());
  for (const GroupLevel& level : p.levels) {
    std::vector<int>& c = counts.emplace_back();
    c.reserve(level.groups.size());
    for (const std::vector<int>& group : level.groups) {
      c.push_back(static_cast<int>(
          std::count_if(group.begin(), group.end(), [&](int d) { return is_free[d]; })));
    }
  }
  return counts;
}

Prepared Prepare(const DeviceTopology& t) {
  Prepared p;
  const int n = std::max(t.count, 0);
  p.n = n;
  p.pair.assign(static_cast<size_t>(n) * n, kNoLink);
  bool class_present[3] = {false, false, false};
  for (const DeviceLink& link : t.links) {
    if (link.a < 0 || link.b < 0 || link.a >= n || link.b >= n || link.a == link.b) continue;
    const int c = ClassValue(link.bandwidth_class);
    if (c < 0 || c > 2) continue;
    class_present[c] = true;
    int8_t& ab = p.pair[static_cast<size_t>(link.a) * n + link.b];
    int8_t& ba = p.pair[static_cast<size_t>(link.b) * n + link.a];
    ab = ba = static_cast<int8_t>(std::max<int>(ab, c));
  }

  // Islands: connected components over links of any class.
  std::vector<int> parent(n);
  for (int i = 0; i < n; ++i) parent[i] = i;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (p.Pair(a, b) != kNoLink) parent[Find(parent, a)] = Find(parent, b);
    }
  }
  std::map<int, int> island_id;
  p.island.resize(n);
  for (int i = 0; i < n; ++i) {
    auto [it, inserted] = island_id.emplace(Find(parent, i), static_cast<int>(island_id.size()));
    p.island[i] = it->second;
  }
  p.island_ids = static_cast<int>(island_id.size());

  std::map<int, int> numa_id;
  std::map<std::string, int, std::less<>> nic_id;
  p.numa.assign(n, -1);
  p.nic.assign(n, -1);
  for (int i = 0; i < n; ++i) {
    if (i < static_cast<int>(t.numa_node.size()) && t.numa_node[i] >= 0) {
      p.numa[i] = numa_id.emplace(t.numa_node[i], static_cast<int>(numa_id.size())).first->second;
    }
    if (i < static_cast<int>(t.nearest_nic.size()) && !t.nearest_nic[i].empty()) {
      p.nic[i] = nic_id.emplace(t.nearest_nic[i], static_cast<int>(nic_id.size())).first->second;
    }
  }
  p.numa_ids = static_cast<int>(numa_id.size());
  p.nic_ids = static_cast<int>(nic_id.size());

  // Clique levels, strongest class present first: the well-connected groups to keep free.
  for (int c = 2; c >= 0; --c) {
    if (!class_present[c]) continue;
    std::vector<Bits> adjacency(n, Bits((n + 63) / 64, 0));
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a != b && p.Pair(a, b) >= c) SetBit(adjacency[a], b);
      }
    }
    p.levels.push_back(MakeLevel(n, CliqueFinder(n, adjacency).Find()));
  }
  if (p.numa_ids > 0) {
    std::vector<std::vector<int>> numa_groups(p.numa_ids);
    for (int i = 0; i < n; ++i) {
      if (p.numa[i] >= 0) numa_groups[p.numa[i]].push_back(i);
    }
    p.levels.push_back(MakeLevel(n, std::move(numa_groups)));
  }
  return p;
}

// Criteria 1-5 of the header: cheap, compared before fragmentation is computed.
struct Prefix {
  int min_class = kNoPairs;  // higher is better
  int islands = 0;
  int pieces = 0;
  int numa_nodes = 0;
  int nics = 0;
};

// <0 when a is better, >0 when b is better, 0 on a tie.
int ComparePrefix(const Prefix& a, const Prefix& b) {
  if (a.min_class != b.min_class) return a.min_class > b.min_class ? -1 : 1;
  if (a.islands != b.islands) return a.islands < b.islands ? -1 : 1;
  if (a.pieces != b.pieces) return a.pieces < b.pieces ? -1 : 1;
  if (a.numa_nodes != b.numa_nodes) return a.numa_nodes < b.numa_nodes ? -1 : 1;
  if (a.nics != b.nics) return a.nics < b.nics ? -1 : 1;
  return 0;
}

int CountDistinct(const std::vector<int>& set, const std::vector<int>& id_of, int ids,
                  std::vector<char>& seen) {
  seen.assign(ids + 1, 0);
  int distinct = 0;
  for (int d : set) {
    const int id = id_of[d] < 0 ? ids : id_of[d];  // unknown counts as one more value
    if (!seen[id]) seen[id] = 1, ++distinct;
  }
  return distinct;
}

// `parent` and `seen` are scratch space, reused across calls to spare allocations.
Prefix ScorePrefix(const Prepared& p, const std::vector<int>& set, std::vector<int>& parent,
                   std::vector<char>& seen) {
  Prefix s;
  const int k = static_cast<int>(set.size());
  parent.resize(k);
  for (int i = 0; i < k; ++i) parent[i] = i;
  for (int i = 0; i < k; ++i) {
    for (int j = i + 1; j < k; ++j) {
      const int c = p.Pair(set[i], set[j]);
      s.min_class = std::min(s.min_class, c);
      if (c != kNoLink) parent[Find(parent, i)] = Find(parent, j);
    }
  }
  for (int i = 0; i < k; ++i) s.pieces += Find(parent, i) == i;
  s.islands = CountDistinct(set, p.island, p.island_ids, seen);
  s.numa_nodes = CountDistinct(set, p.numa, p.numa_ids, seen);
  s.nics = CountDistinct(set, p.nic, p.nic_ids, seen);
  return s;
}

// Criterion 6: per level, the free counts left per group, sorted descending.
// Into `left`, whose storage is reused.
void Fragmentation(const Prepared& p, const FreeCounts& free_counts, const std::vector<int>& set,
                   std::vector<std::vector<int>>& left) {
  left.resize(p.levels.size());
  for (size_t l = 0; l < p.levels.size(); ++l) {
    std::vector<int>& counts = left[l];
    counts.assign(free_counts[l].begin(), free_counts[l].end());
    for (int d : set) {
      for (int g : p.levels[l].groups_of_device[d]) --counts[g];
    }
    std::sort(counts.begin(), counts.end(), std::greater<>());
  }
}

// Keeps the best candidate seen; candidates are sorted index vectors.
class BestSet {
 public:
  BestSet(const Prepared& p, const FreeCounts& free_counts) : p_(p), free_counts_(free_counts) {}

  // Whether `set` became the best.
  bool Offer(const std::vector<int>& set) {
    const Prefix prefix = ScorePrefix(p_, set, parent_, seen_);
    const int by_prefix = best_.empty() ? -1 : ComparePrefix(prefix, best_prefix_);
    if (by_prefix > 0) return false;
    Fragmentation(p_, free_counts_, set, frag_);
    // Larger counts left in the largest groups win; then the lowest indices.
    if (by_prefix < 0 || frag_ > best_frag_ || (frag_ == best_frag_ && set < best_)) {
      best_ = set;
      best_prefix_ = prefix;
      std::swap(best_frag_, frag_);
      return true;
    }
    return false;
  }

  const std::vector<int>& best() const { return best_; }

 private:
  const Prepared& p_;
  const FreeCounts& free_counts_;
  std::vector<int> best_;
  Prefix best_prefix_;
  std::vector<std::vector<int>> best_frag_;
  // Scratch space.
  std::vector<int> parent_;
  std::vector<char> seen_;
  std::vector<std::vector<int>> frag_;
};

// Whether C(n, k) <= limit.
bool CombinationsAtMost(int n, int k, int64_t limit) {
  k = std::min(k, n - k);
  __int128 c = 1;
  for (int i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;  // exact: c * (n-k+i) is divisible by i at every step
    if (c > limit) return false;
  }
  return true;
}

void Exhaustive(const std::vector<int>& free_list, int k, BestSet& best) {
  const int n = static_cast<int>(free_list.size());
  std::vector<int> pos(k);
  for (int i = 0; i < k; ++i) pos[i] = i;
  std::vector<int> set(k);
  while (true) {
    for (int i = 0; i < k; ++i) set[i] = free_list[pos[i]];
    best.Offer(set);
    int i = k - 1;
    while (i >= 0 && pos[i] == n - k + i) --i;
    if (i < 0) return;
    ++pos[i];
    for (int j = i + 1; j < k; ++j) pos[j] = pos[j - 1] + 1;
  }
}

// Local search after the greedy one: replace one member by one free non-member while that
// scores better (first improvement, members and candidates in index order), at most
// kMaxImprovements times. Each step strictly improves a total order, so it always ends.
constexpr int kMaxImprovements = 64;

void Improve(const std::vector<int>& free_list, BestSet& best) {
  for (int step = 0; step < kMaxImprovements; ++step) {
    const std::vector<int> current = best.best();
    bool improved = false;
    for (size_t i = 0; i < current.size() && !improved; ++i) {
      for (int d : free_list) {
        if (std::binary_search(current.begin(), current.end(), d)) continue;
        std::vector<int> swapped = current;
        swapped[i] = d;
        std::sort(swapped.begin(), swapped.end());
        if (best.Offer(swapped)) {
          improved = true;
          break;
        }
      }
    }
    if (!improved) return;
  }
}

// Grows one set from each free device, each step adding the device that keeps the set best
// connected (see header), and offers every distinct grown set.
void Greedy(const Prepared& p, const std::vector<int>& free_list, int k, BestSet& best) {
  const int nf = static_cast<int>(free_list.size());
  std::vector<std::vector<int>> grown;
  grown.reserve(nf);
  std::vector<int> min_to(nf), links_to(nf);
  std::vector<char> taken(nf), island_used(p.island_ids), numa_used(p.numa_ids),
      nic_used(p.nic_ids);
  for (int seed = 0; seed < nf; ++seed) {
    std::fill(taken.begin(), taken.end(), 0);
    std::fill(island_used.begin(), island_used.end(), 0);
    std::fill(numa_used.begin(), numa_used.end(), 0);
    std::fill(nic_used.begin(), nic_used.end(), 0);
    std::fill(min_to.begin(), min_to.end(), kNoPairs);
    std::fill(links_to.begin(), links_to.end(), 0);
    int set_min = kNoPairs;
    std::vector<int> set;
    auto add = [&](int f) {
      const int d = free_list[f];
      taken[f] = 1;
      set.push_back(d);
      set_min = std::min(set_min, min_to[f]);
      island_used[p.island[d]] = 1;
      if (p.numa[d] >= 0) numa_used[p.numa[d]] = 1;
      if (p.nic[d] >= 0) nic_used[p.nic[d]] = 1;
      for (int e = 0; e < nf; ++e) {
        const int c = p.Pair(free_list[e], d);
        min_to[e] = std::min(min_to[e], c);
        links_to[e] += c != kNoLink;
      }
    };
    add(seed);
    while (static_cast<int>(set.size()) < k) {
      int pick = -1;
      std::tuple<int, int, int, int, int> pick_key;
      for (int f = 0; f < nf; ++f) {
        if (taken[f]) continue;
        const int d = free_list[f];
        // Larger is better in every position; the scan order makes the lowest index win ties.
        const std::tuple<int, int, int, int, int> key{
            std::min(set_min, min_to[f]), island_used[p.island[d]], links_to[f],
            p.numa[d] < 0 || numa_used[p.numa[d]], p.nic[d] < 0 || nic_used[p.nic[d]]};
        if (pick < 0 || key > pick_key) pick = f, pick_key = key;
      }
      add(pick);
    }
    std::sort(set.begin(), set.end());
    grown.push_back(std::move(set));
  }
  std::sort(grown.begin(), grown.end());
  grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
  for (const std::vector<int>& set : grown) best.Offer(set);
  Improve(free_list, best);
}

// The free instances among 0..n-1, as flags and as an ascending list.
std::vector<bool> FreeFlags(int n, const std::vector<bool>& free, std::vector<int>* free_list) {
  std::vector<bool> is_free(n, false);
  for (int i = 0; i < n && i < static_cast<int>(free.size()); ++i) {
    if (free[i]) {
      is_free[i] = true;
      free_list->push_back(i);
    }
  }
  return is_free;
}

}  // namespace

DeviceSetChooser::DeviceSetChooser(const DeviceTopology& topology)
    : topology_(std::make_shared<const Prepared>(Prepare(topology))) {}

std::vector<int> DeviceSetChooser::Choose(const std::vector<bool>& free, int k,
                                          const DeviceSetChoiceOptions& options) const {
  const Prepared& p = *topology_;
  std::vector<int> free_list;
  const std::vector<bool> is_free = FreeFlags(p.n, free, &free_list);
  const int nf = static_cast<int>(free_list.size());
  if (k <= 0 || k > nf) return {};
  if (k == nf) return free_list;

  const FreeCounts free_counts = CountFree(p, is_free);
  BestSet best(p, free_counts);
  if (CombinationsAtMost(nf, k, options.exhaustive_limit)) {
    Exhaustive(free_list, k, best);
  } else {
    Greedy(p, free_list, k, best);
  }
  return best.best();
}

int DeviceSetChooser::Compare(const std::vector<bool>& free, std::vector<int> a,
                              std::vector<int> b) const {
  const Prepared& p = *topology_;
  std::vector<int> free_list;
  const FreeCounts free_counts = CountFree(p, FreeFlags(p.n, free, &free_list));
  for (std::vector<int>* set : {&a, &b}) {
    std::sort(set->begin(), set->end());
    set->erase(std::remove_if(set->begin(), set->end(), [&](int d) { return d < 0 || d >= p.n; }),
               set->end());
    set->erase(std::unique(set->begin(), set->end()), set->end());
  }
  std::vector<int> parent;
  std::vector<char> seen;
  const Prefix pa = ScorePrefix(p, a, parent, seen);
  if (const int c = ComparePrefix(pa, ScorePrefix(p, b, parent, seen)); c != 0) return c;
  std::vector<std::vector<int>> fa, fb;
  Fragmentation(p, free_counts, a, fa);
  Fragmentation(p, free_counts, b, fb);
  if (fa == fb) return 0;
  return fa > fb ? -1 : 1;
}

std::vector<int> ChooseDeviceSet(const DeviceTopology& topology, const std::vector<bool>& free,
                                 int k) {
  return DeviceSetChooser(topology).Choose(free, k);
}

std::vector<int> ChooseDeviceSet(const DeviceTopology& topology, const std::vector<bool>& free,
                                 int k, const DeviceSetChoiceOptions& options) {
  return DeviceSetChooser(topology).Choose(free, k, options);
}

int CompareDeviceSets(const DeviceTopology& topology, const std::vector<bool>& free,
                      std::vector<int> a, std::vector<int> b) {
  return DeviceSetChooser(topology).Compare(free, std::move(a), std::move(b));
}

int BestFitFraction(const std::vector<Quantity>& available, Quantity demand) {
  if (demand.raw() <= 0 || demand.raw() >= Quantity::kScale) return -1;
  int best = -1;
  for (int i = 0; i < static_cast<int>(available.size()); ++i) {
    if (available[i] < demand) continue;
    if (best < 0 || available[i] < available[best]) best = i;
  }
  return best;
}

}  // namespace tessera
