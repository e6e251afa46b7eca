// The tpu family's device messages: the newest lines the TPU runtime (libtpu) wrote to its log
// folder during a worker's life (DeviceErrorOptions::tpu_log_dir, else /tmp/tpu_logs on the live
// machine; none on a fake tree). A Snapshot notes each log file's size; MessagesSince reads what
// was appended since (at most the last 4 KiB of each file, of the 64 newest files) and reports
// the last three lines, preferring error and fatal lines where the files are in glog's format
// ("E1203 14:05:09.123456  1234 file.cc:12] ..."):
//
//   TPU runtime log tpu_driver.host.user.log.ERROR.20261203-140509.1234: E1203 ... message
//
// The folder is the host's, not a chip's: every worker holding TPU chips of the host hears it.
// Only regular files owned by this user (or root) are read, never through a link. No folder, no
// message.
// Not thread-safe (one reader, one caller); each call lists one folder and reads a few files.
#pragma once

#include <memory>
#include <string>

#include "hardware/device_error_reader.h"

namespace tessera {

std::unique_ptr<DeviceErrorReader> MakeTpuErrorReader(const DeviceErrorContext& context);

// The folder a reader on `context` reads, as described above ("" for none).
std::string TpuLogDir(const DeviceErrorContext& context);

}  // namespace tessera
