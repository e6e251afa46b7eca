#include "head/store_writer.h"


#include "absl/strings/str_cat.h"
#include "base/log_line.h"
#include "base/string_util.h"

namespace tessera {

void StoreWriter::Put(std::string_view table, std::string_view key, std::string_view value) const {
  if (absl::Status put = store_->Put(table, key, value); !put.ok()) {
    Failed("write", table, key, put);
  }
}

void StoreWriter::Delete(std::string_view table, std::string_view key) const {
  if (absl::StatusOr<bool> deleted = store_->Delete(table, key); !deleted.ok()) {
    Failed("delete", table, key, deleted.status());
  }
}

void StoreWriter::Failed(std::string_view what, std::string_view table, std::string_view key,
                         const absl::Status& status) const {
  const std::string line = absl::StrCat("the state store could not ", ToAbsl(what), " ",
                                        ToAbsl(table), "/", ToAbsl(key), ": ", status.message(),
                                        " (it may not survive a head restart)");
  LogLine(absl::StrCat("head: ", line));
  events_->Record(line);
}

}  // namespace tessera
