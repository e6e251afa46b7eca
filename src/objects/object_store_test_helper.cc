// A separate process for object_store_server_test: it talks to a store through the socket as a
// worker would. Usage:
//   object_store_test_helper put SOCKET ID_HEX SIZE BYTE     create, fill with BYTE, seal
//   object_store_test_helper check SOCKET ID_HEX SIZE BYTE   get; exit 0 iff size and every byte
//   match object_store_test_helper pin-and-die SOCKET ID_HEX       get, print "pinned", die by
//   SIGKILL object_store_test_helper create-and-die SOCKET ID_HEX SIZE  create, print "created",
//   SIGKILL object_store_test_helper own-and-wait SOCKET ID_HEX SIZE OWNER  declare this connection
//   as
//                                         OWNER, put SIZE bytes owned by it, print "stored", wait
// Exit 0 on success; 2 on a usage error; 1 with the error on stderr otherwise.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "objects/object_store_client.h"

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 1;
}

void Announce(const char* what) {
  std::printf("%s\n", what);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string mode = argv[1];
  auto id = tessera::ObjectId::FromHex(argv[3]);
  if (!id.ok()) return Fail(id.status());
  auto client = tessera::ObjectStoreClient::Connect({.socket_path = argv[2]});
  if (!client.ok()) return Fail(client.status());

  if (mode == "put" && argc == 6) {
    const uint64_t size = std::strtoull(argv[4], nullptr, 10);
    auto buf = (*client)->Create(*id, size, "helper", {});
    if (!buf.ok()) return Fail(buf.status());
    std::memset(buf->data(), std::atoi(argv[5]), size);
    absl::Status s = (*client)->Seal(*id);
    return s.ok() ? 0 : Fail(s);
  }
  if (mode == "check" && argc == 6) {
    const uint64_t size = std::strtoull(argv[4], nullptr, 10);
    const int byte = std::atoi(argv[5]);
    auto buf = (*client)->Get(*id);
    if (!buf.ok()) return Fail(buf.status());
    if (buf->size() != size) return Fail(absl::DataLossError("size differs"));
    for (uint64_t i = 0; i < size; ++i) {
      if (buf->data()[i] != static_cast<uint8_t>(byte))
        return Fail(absl::DataLossError("byte differs"));
    }
    return 0;
  }
  if (mode == "pin-and-die" && argc == 4) {
    auto buf = (*client)->Get(*id);
    if (!buf.ok()) return Fail(buf.status());
    Announce("pinned");
    raise(SIGKILL);
  }
  if (mode == "create-and-die" && argc == 5) {
    auto buf = (*client)->Create(*id, std::strtoull(argv[4], nullptr, 10), "", {});
    if (!buf.ok()) return Fail(buf.status());
    Announce("created");
    raise(SIGKILL);
  }
  if (mode == "own-and-wait" && argc == 6) {
    if (absl::Status s = (*client)->DeclareOwner(argv[5]); !s.ok()) return Fail(s);
    const uint64_t size = std::strtoull(argv[4], nullptr, 10);
    absl::Status s = (*client)->Put(*id, std::string(size, 'x'), "", {.owner = argv[5]});
    if (!s.ok()) return Fail(s);
    Announce("stored");
    while (true) pause();
  }
  return 2;
}
