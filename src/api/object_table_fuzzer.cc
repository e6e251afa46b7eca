// libFuzzer target: the owner's object table under any sequence of what its callers and the
// Owner.UpdateBorrows RPC do to it (values, local references, borrower counts of any sign,
// borrowers declared gone) never crashes, and always agrees with a plain model of the rules in
// object_table.h: an entry lives while it has a local reference or a borrower count.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "api/object_table.h"

namespace {

struct Model {
  int64_t local = 0;
  std::map<std::string, int64_t> borrowers;
};

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "object table disagrees with the model: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tessera::ObjectId;
  static const std::vector<ObjectId> ids = {ObjectId::FromRandom(), ObjectId::FromRandom(),
                                            ObjectId::FromRandom(), ObjectId::FromRandom()};
  static const std::vector<std::string> borrowers = {"10.0.0.1:1", "10.0.0.2:2", "borrower-x"};
  tessera::api::ObjectTable table;
  std::map<ObjectId, Model> model;
  for (size_t i = 0; i + 2 < size; i += 3) {
    const uint8_t op = data[i] % 7;
    const ObjectId& id = ids[data[i + 1] % ids.size()];
    const std::string& borrower = borrowers[(data[i + 1] >> 4) % borrowers.size()];
    const int64_t delta = static_cast<int64_t>(data[i + 2] % 7) - 3;
    auto found = model.find(id);
    auto unreferenced = [](const Model& m) { return m.local <= 0 && m.borrowers.empty(); };
    switch (op) {
      case 0:
        table.AddPending(id);
        model[id];
        break;
      case 1:
        table.AddValue(id, "value");
        model[id];
        break;
      case 2:
        Check(table.AddLocal(id) == (found != model.end()), "AddLocal's answer");
        if (found != model.end()) ++found->second.local;
        break;
      case 3:
        table.Release(id);
        if (found != model.end() && --found->second.local <= 0 && found->second.borrowers.empty()) {
          model.erase(found);
        }
        break;
      case 4:
        Check(table.UpdateBorrows(id, borrower, delta) == (found != model.end()),
              "UpdateBorrows' answer");
        if (found != model.end()) {
          if ((found->second.borrowers[borrower] += delta) <= 0) {
            found->second.borrowers.erase(borrower);
          }
          if (delta < 0 && unreferenced(found->second)) model.erase(found);
        }
        break;
      case 5:
        table.DropBorrower(borrower);
        for (auto it = model.begin(); it != model.end();) {
          const bool had = it->second.borrowers.erase(borrower) > 0;
          it = had && unreferenced(it->second) ? model.erase(it) : std::next(it);
        }
        break;
      case 6: (void)table.Complete(id, std::string("done")); break;
    }
    Check(table.size() == model.size(), "size");
    size_t borrowed = 0;
    for (const auto& [one, m] : model) {
      borrowed += m.borrowers.empty() ? 0 : 1;
      auto counts = table.Borrowers(one);
      std::sort(counts.begin(), counts.end());
      Check(counts == std::vector<std::pair<std::string, int64_t>>(m.borrowers.begin(),
                                                                   m.borrowers.end()),
            "a borrower's count");
    }
    Check(table.BorrowedCount() == borrowed, "BorrowedCount");
  }
  return 0;
}
