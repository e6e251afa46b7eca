// KernelLog: the kernel log read as /dev/kmsg gives it, without ever blocking, from where it
// stood when opened (earlier records are skipped). Each /dev/kmsg record is one line
// "prio,seq,ts_usec,flags;text" (continuation lines " KEY=VALUE" follow it and are skipped); one
// read returns one record, EAGAIN when there is no more, EPIPE when the kernel's ring buffer
// overwrote records before they were read. The same code reads a regular file or a FIFO of such
// lines, which is what tests write their records into.
//
//   KernelLog log("/dev/kmsg");                    // opened, at the end
//   for (const KernelLogRecord& r : log.ReadNew(1024)) ...
//
// Records lost to an overrun, or skipped in the sequence numbers, are counted (lost()).
// Part of tessera_plugin_support. Not thread-safe: one owner reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/device_error_reader.h"

namespace tessera {

struct KernelLogRecord {
  uint64_t seq = 0;  // the kernel's sequence number
  std::string text;  // the message, e.g. "NVRM: Xid (PCI:0000:01:00): 79, ..."
};

class KernelLog {
 public:
  // Opens `path` (O_RDONLY | O_NONBLOCK) and seeks to its end. A path that cannot be opened
  // leaves the log closed: error() says why, and ReadNew reads nothing.
  explicit KernelLog(std::string path);
  ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;

  // The records written since the last call (at most `max_records`; the rest wait for the next
  // call), oldest first. Never blocks.
  std::vector<KernelLogRecord> ReadNew(size_t max_records);

  const std::string& path() const { return path_; }
  // "" while the log can be read; otherwise one line, e.g. "cannot read the kernel log
  // /dev/kmsg: Permission denied".
  const std::string& error() const { return error_; }
  // Records known to be lost so far: ring-buffer overruns (each counts at least one) and gaps
  // in the sequence numbers.
  uint64_t lost() const { return lost_; }

 private:
  void TakeLine(std::string_view line, std::vector<KernelLogRecord>& out);

  const std::string path_;
  int fd_ = -1;
  std::string error_;
  std::string partial_;  // the start of a line not yet ended (a regular file or FIFO)
  bool have_seq_ = false;
  uint64_t last_seq_ = 0;
  uint64_t lost_ = 0;
};

// The kernel log a reader on `context` reads: DeviceErrorOptions::kernel_log, else /dev/kmsg on
// the live machine; "" (none) on a fake tree.
std::string KernelLogPath(const DeviceErrorContext& context);

}  // namespace tessera
