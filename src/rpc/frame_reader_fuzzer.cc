// libFuzzer target: the frames of a local task stream (rpc/local_stream_socket.h) as any peer
// could send them, read as TaskBatch messages. The reader never crashes, never reads a frame past
// the bytes sent, ends cleanly only at a frame boundary, and every message it returns encodes
// back to a frame that reads the same.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rpc/local_stream_socket.h"
#include "tessera/v1/worker.pb.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "frame reader: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // within one socket buffer: written before reading
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  Check(tessera::rpc::WriteAll(fds[1], std::string_view(reinterpret_cast<const char*>(data), size)),
        "cannot write the input");
  shutdown(fds[1], SHUT_WR);
  tessera::rpc::FrameReader reader(fds[0]);
  tessera::v1::TaskBatch batch;
  size_t consumed = 0;
  while (reader.Next(&batch)) {
    consumed += 4;
    // The frame's length as sent (the message may re-encode shorter: unknown fields stay).
    const size_t length = static_cast<size_t>(data[consumed - 4]) |
                          (static_cast<size_t>(data[consumed - 3]) << 8) |
                          (static_cast<size_t>(data[consumed - 2]) << 16) |
                          (static_cast<size_t>(data[consumed - 1]) << 24);
    consumed += length;
    Check(consumed <= size, "a frame past the bytes sent");
    std::string frame;
    tessera::rpc::AppendFrame(batch, &frame);
    int again[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, again) == 0) {
      if (frame.size() <= 64 * 1024) {
        Check(tessera::rpc::WriteAll(again[1], frame), "cannot write the frame again");
        shutdown(again[1], SHUT_WR);
        tessera::rpc::FrameReader second(again[0]);
        tessera::v1::TaskBatch reread;
        Check(second.Next(&reread), "a message's own frame does not read");
        Check(reread.SerializeAsString() == batch.SerializeAsString(),
              "a message's own frame reads differently");
      }
      close(again[0]);
      close(again[1]);
    }
    batch.Clear();
  }
  if (reader.error().empty()) Check(consumed == size, "a clean end inside the input");
  close(fds[0]);
  close(fds[1]);
  return 0;
}
