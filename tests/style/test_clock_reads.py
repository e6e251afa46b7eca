"""The head, the training jobs and the node agent read time only from their injected Clock
(base/clock.h), so tests move time by hand (FakeClock) instead of sleeping: no absl::Now() or
absl::SleepFor() in src/head, src/train or src/node outside tests, except the real-time waits
KNOWN_REAL_TIME lists with the reason each is real. The list may only shrink."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = ("src/head", "src/train", "src/node")
READ = re.compile(r"\babsl::(Now|SleepFor)\(")

KNOWN_REAL_TIME = {
    "src/train/job_manager.cc": "StreamJobLogs paces a gRPC stream to its reader in real time",
    "src/train/cluster_gang_backend.cc": "a rank's lease is asked for in rounds against the "
                                         "agent, in real time",
    "src/node/object_data_server.cc": "its connections' deadlines are epoll_wait timeouts, which "
                                      "the kernel counts in real time",
    "src/node/object_data_socket.cc": "a transfer's deadline becomes the socket's SO_RCVTIMEO and "
                                      "SO_SNDTIMEO, real time",
    "src/node/object_transfer.cc": "a pull's deadline bounds TCP connects and socket waits, real "
                                   "time",
}


def is_test(path):
    return path.name.endswith(("_test.cc", "_fuzzer.cc", "_test_util.h")) or \
        path.name.startswith("redis_test_server")


def clock_reads():
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".cc", ".h") or is_test(path):
                continue
            relative = str(path.relative_to(ROOT))
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if READ.search(line.split("//", 1)[0]):
                    found.setdefault(relative, []).append(f"{relative}:{number}")
    return found


def test_the_head_and_the_jobs_read_time_from_their_clock():
    found = clock_reads()
    new = [where for relative, lines in sorted(found.items()) if relative not in KNOWN_REAL_TIME
           for where in lines]
    assert not new, "read the injected Clock (base/clock.h) instead:\n" + "\n".join(new)


def test_the_known_list_only_shrinks():
    gone = [relative for relative in KNOWN_REAL_TIME if relative not in clock_reads()]
    assert not gone, f"reads no real time any more: remove from KNOWN_REAL_TIME: {gone}"


def test_the_check_sees_a_read():
    assert READ.search("  const absl::Time t = absl::Now();")
    assert READ.search("absl::SleepFor(absl::Seconds(1));")
    assert not READ.search("clock_->Now()")
