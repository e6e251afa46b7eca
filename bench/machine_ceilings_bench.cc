// The ceilings of the machine a benchmark run is on, measured in the same run so that Tessera's
// and the peers' figures can be read as fractions of them (docs/benchmarks.md): single-thread
// memcpy bandwidth of a large buffer, loopback TCP round trip of a small message, and loopback
// TCP bulk throughput (from cache-resident chunks, and between two 1 GiB buffers).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"

namespace {

// memcpy of `range(0)` MiB between two buffers touched beforehand (no page faults in the loop).
void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  std::vector<char> from(bytes, 1), to(bytes, 2);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::DoNotOptimize(to.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Memcpy)->Arg(800)->Unit(benchmark::kMillisecond)->UseRealTime();

// A connected loopback TCP pair: {client, server} file descriptors; {-1, -1} on failure.
std::pair<int, int> LoopbackPair() {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (listener >= 0) ::close(listener);
    return {-1, -1};
  }
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(client, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    ::close(client);
    ::close(listener);
    return {-1, -1};
  }
  int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return {client, server};
}

bool ReadFully(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::read(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteFully(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A 100-byte message to an echo thread and back, as ipc-bench's ping-pong.
void BM_LoopbackTcpRoundTrip(benchmark::State& state) {
  auto [client, server] = LoopbackPair();
  if (client < 0) {
    state.SkipWithError("cannot open a loopback TCP connection");
    return;
  }
  std::thread echo([fd = server] {
    char message[100];
    while (ReadFully(fd, message, sizeof(message)) && WriteFully(fd, message, sizeof(message))) {
    }
  });
  char message[100] = {};
  for (auto _ : state) {
    if (!WriteFully(client, message, sizeof(message)) ||
        !ReadFully(client, message, sizeof(message))) {
      state.SkipWithError("the echo connection broke");
      break;
    }
  }
  ::shutdown(client, SHUT_RDWR);
  echo.join();
  ::close(client);
  ::close(server);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LoopbackTcpRoundTrip)->Unit(benchmark::kMicrosecond)->UseRealTime();

constexpr size_t kChunk = 1 << 20;
constexpr size_t kTotal = size_t{1} << 30;

// 1 GiB streamed in 1 MiB writes to a thread that reads it all.
void BM_LoopbackTcpThroughput(benchmark::State& state) {
  for (auto _ : state) {
    auto [client, server] = LoopbackPair();
    if (client < 0) {
      state.SkipWithError("cannot open a loopback TCP connection");
      return;
    }
    std::thread reader([fd = server] {
      std::vector<char> buffer(kChunk);
      size_t left = kTotal;
      while (left > 0) {
        ssize_t n = ::read(fd, buffer.data(), std::min(left, kChunk));
        if (n <= 0) return;
        left -= static_cast<size_t>(n);
      }
    });
    std::vector<char> chunk(kChunk, 7);
    for (size_t sent = 0; sent < kTotal; sent += kChunk) {
      if (!WriteFully(client, chunk.data(), kChunk)) break;
    }
    reader.join();
    ::close(client);
    ::close(server);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kTotal));
}
BENCHMARK(BM_LoopbackTcpThroughput)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same 1 GiB, but sent from one 1 GiB buffer and received into another (both touched
// beforehand), as an object copy between two stores moves it: the memory traffic of the bytes
// themselves, which the cache-resident 1 MiB chunks above never pay.
void BM_LoopbackTcpThroughputBufferToBuffer(benchmark::State& state) {
  std::vector<char> from(kTotal, 7), to(kTotal, 1);
  for (auto _ : state) {
    auto [client, server] = LoopbackPair();
    if (client < 0) {
      state.SkipWithError("cannot open a loopback TCP connection");
      return;
    }
    std::thread reader([fd = server, &to] {
      size_t got = 0;
      while (got < kTotal) {
        ssize_t n = ::read(fd, to.data() + got, kTotal - got);
        if (n <= 0) return;
        got += static_cast<size_t>(n);
      }
    });
    (void)WriteFully(client, from.data(), kTotal);
    reader.join();
    ::close(client);
    ::close(server);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kTotal));
}
BENCHMARK(BM_LoopbackTcpThroughputBufferToBuffer)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
