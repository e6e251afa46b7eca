#!/usr/bin/env python3
"""Launch cost of a 4-rank PyTorch DDP job: `tessera train` on a TPU v6e 4x4 slice vs torchrun.

    bench/train_launch_bench.sh [--runs 5] [--restart-runs 3] [--steps 40] [--tessera PATH]
                                [--torchrun-monitor-interval 0.1]

Brings up its own local cluster (examples/clusters/demo.yaml, a fresh TESSERA_STATE_DIR, taken
down at exit, also on Ctrl-C), then runs examples/train/ddp_train.py with 4 ranks R times under

    tessera train --accelerator TPU-V6E --topology 4x4 --name NAME -- python3 ddp_train.py ...
    torchrun --standalone --nproc-per-node 4 ddp_train.py ...        (python3 -m torch.distributed.run)

interleaved (the order alternates every run) after one untimed warm-up of each, and prints the
medians of:

- launch-to-exit: the command's wall time from start to exit;
- command to every rank's first line: the client sees each rank's start line (so it includes the
  interpreter's start and `import torch`; measured the same way for both launchers);
- tessera's launch_ms (`tessera job status --json`: submission to every rank running);
- the group restart: a run with rank 2 SIGKILLed after the checkpoint at step 10 and
  --max-restarts 1: from the kill to every rank's TORCHELASTIC_RESTART_COUNT=1 line (both
  launchers), and tessera's last_restart_ms (the failure to every rank running again).

It also checks that every run of both launchers ended with the same final parameters. Not a
test: nothing is asserted on time.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "train" / "ddp_train.py"
START_LINE = re.compile(r"^(?:\[rank\d+\]: )?rank (\d+)/(\d+) .*TORCHELASTIC_RESTART_COUNT=(\d+) pid (\d+)")
SHA_LINE = re.compile(r"^(?:\[rank\d+\]: )?rank (\d+) params-sha256 ([0-9a-f]{64})$")
CHECKPOINT_LINE = re.compile(r"^(?:\[rank0\]: )?checkpoint step (\d+)$")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--tessera", default=os.environ.get("TESSERA_BIN", str(REPO / "build/bin/tessera")))
    p.add_argument("--cluster", default=str(REPO / "examples/clusters/demo.yaml"))
    p.add_argument("--runs", type=int, default=5, help="timed runs of each launcher")
    p.add_argument("--restart-runs", type=int, default=3, help="runs with a killed rank, each launcher")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--timeout", type=float, default=300, help="seconds any one run may take")
    p.add_argument("--torchrun-monitor-interval", type=float, default=None,
                   help="pass --monitor_interval to torchrun (default: its own default)")
    return p.parse_args()


def ms(seconds):
    return seconds * 1000.0


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, unit="ms"):
    return "-" if value is None else f"{value:.0f} {unit}"


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Run:
    """A command whose output lines are timestamped as they arrive (stderr merged into stdout)."""

    def __init__(self, cmd, cwd, env, on_line=None):
        self.cmd = [str(c) for c in cmd]
        self.lines = []  # (monotonic time, text)
        self.on_line = on_line
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            now = time.monotonic()
            text = line.rstrip("\n")
            self.lines.append((now, text))
            if self.on_line:
                self.on_line(now, text)

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"timed out after {timeout}s: {shlex.join(self.cmd)}\n" + self.tail())
        self.t_exit = time.monotonic()
        self.reader.join(timeout=10)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    def tail(self, n=30):
        return "\n".join(text for _, text in self.lines[-n:])

    def first_lines_done(self, restart_count, world_size=4, after=0.0):
        """When every rank had printed its start line with this restart count (None: never)."""
        seen = {}
        for t, text in self.lines:
            m = START_LINE.match(text)
            if m and int(m.group(3)) == restart_count and t >= after:
                seen.setdefault(int(m.group(1)), t)
        return max(seen.values()) if len(seen) == world_size else None

    def checksums(self):
        return {int(m.group(1)): m.group(2) for _, text in self.lines
                for m in [SHA_LINE.match(text)] if m}


class Bench:
    def __init__(self, args):
        self.args = args
        self.tessera = Path(args.tessera)
        self.python = sys.executable
        self.base = Path(tempfile.mkdtemp(prefix="tessera-train-bench-"))
        self.state = self.base / "state"
        self.work = self.base / "work"
        self.work.mkdir()
        self.env = dict(os.environ, TESSERA_STATE_DIR=str(self.state))
        self.up = False
        self.names = 0

    # Commands -------------------------------------------------------------------------------
    def script_args(self, output, extra=()):
        return [SCRIPT, "--steps", self.args.steps, "--seed", self.args.seed, "--output", output, *extra]

    def tessera_cmd(self, name, output, extra_train=(), extra_script=()):
        return [self.tessera, "train", "--accelerator", "TPU-V6E", "--topology", "4x4",
                "--name", name, *extra_train, "--", self.python,
                *self.script_args(output, extra_script)]

    def torchrun_cmd(self, output, extra_run=(), extra_script=()):
        # torch 1.x spells it --nproc_per_node; Debian 12's torch 1.13 under Python 3.11 cannot
        # parse its own default --redirects/--tee "0", so a map naming no local rank is passed.
        cmd = [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4",
               *extra_run]
        if self.args.torchrun_monitor_interval is not None:
            cmd.append(f"--monitor_interval={self.args.torchrun_monitor_interval}")
        from torch.distributed.elastic.multiprocessing.api import Std
        if Std.from_str("0") is None:
            cmd += ["--redirects", "9:0", "--tee", "9:0"]
        return cmd + self.script_args(output, extra_script)

    def cli(self, *args, timeout=60):
        r = subprocess.run([str(self.tessera), *map(str, args)], cwd=self.work, env=self.env,
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"tessera {' '.join(map(str, args))} exited {r.returncode}: "
                               f"{r.stdout}{r.stderr}")
        return r.stdout

    def job_status(self, name):
        listed = json.loads(self.cli("job", "list", "--json"))
        jobs = listed.get("jobs", []) if isinstance(listed, dict) else listed
        ids = [j.get("job_id") for j in jobs if j.get("name") == name]
        if not ids:
            return None
        return json.loads(self.cli("job", "status", ids[-1], "--json"))

    def name(self, stem):
        self.names += 1
        return f"{stem}-{self.names}"

    # Runs ----------------------------------------------------------------------------------
    def plain(self, launcher):
        out = self.work / f"{launcher}-{self.names}.pt"
        name = self.name("bench")
        cmd = self.tessera_cmd(name, out) if launcher == "tessera" else self.torchrun_cmd(out)
        run = Run(cmd, self.work, self.env)
        rc = run.wait(self.args.timeout)
        if rc != 0:
            raise RuntimeError(f"{launcher} exited {rc}: {shlex.join(run.cmd)}\n{run.tail()}")
        result = {"exit": ms(run.t_exit - run.t0), "cmd": run.cmd, "sums": run.checksums()}
        started = run.first_lines_done(0)
        result["ranks_printed"] = ms(started - run.t0) if started else None
        if launcher == "tessera":
            status = self.job_status(name) or {}
            result["launch_ms"] = float(status["launch_ms"]) if status.get("launch_ms") else None
        return result

    def restart(self, launcher):
        """Rank 2 SIGKILLed once the checkpoint at step 10 is written; --max-restarts 1."""
        out = self.work / f"{launcher}-restart-{self.names}.pt"
        ckpt = self.work / f"ckpt-{launcher}-{self.names}"
        name = self.name("bench-restart")
        extra_script = ["--checkpoint-dir", ckpt, "--checkpoint-every", "10", "--step-delay", "0.1"]
        if launcher == "tessera":
            cmd = self.tessera_cmd(name, out, ["--max-restarts", "1"], extra_script)
        else:
            cmd = self.torchrun_cmd(out, ["--max_restarts=1"], extra_script)
        checkpointed = threading.Event()

        def on_line(_, text):
            m = CHECKPOINT_LINE.match(text)
            if m and int(m.group(1)) >= 10:
                checkpointed.set()
        run = Run(cmd, self.work, self.env, on_line)
        if not checkpointed.wait(self.args.timeout):
            run.kill()
            raise RuntimeError(f"{launcher}: no checkpoint\n{run.tail()}")
        victim = self.victim_pid(launcher, name, run)
        os.kill(victim, signal.SIGKILL)
        t_kill = time.monotonic()
        rc = run.wait(self.args.timeout)
        if rc != 0:
            raise RuntimeError(f"{launcher} exited {rc} after a restart: {shlex.join(run.cmd)}\n{run.tail()}")
        restarted = run.first_lines_done(1, after=t_kill)
        result = {"restart_printed": ms(restarted - t_kill) if restarted else None, "cmd": run.cmd}
        if launcher == "tessera":
            status = self.job_status(name) or {}
            result["last_restart_ms"] = (float(status["last_restart_ms"])
                                         if status.get("last_restart_ms") else None)
        return result

    def victim_pid(self, launcher, name, run):
        if launcher == "tessera":
            status = self.job_status(name)
            pids = [int(r["pid"]) for r in status.get("ranks", []) if int(r.get("rank", -1)) == 2]
        else:
            pids = [int(m.group(4)) for _, text in run.lines for m in [START_LINE.match(text)]
                    if m and m.group(1) == "2" and m.group(3) == "0"]
        if not pids or "ddp_train.py" not in cmdline(pids[-1]):
            raise RuntimeError(f"{launcher}: cannot find rank 2's process ({pids})")
        return pids[-1]

    # The whole bench -------------------------------------------------------------------------
    def main(self):
        a = self.args
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                      if line.startswith("model name")), "?")
        print(f"machine: nproc={os.cpu_count()}, {model}, load average {load}")
        t = time.monotonic()
        self.cli("up", a.cluster, timeout=180)
        self.up = True
        print(f"cluster: tessera up {a.cluster} in {time.monotonic() - t:.1f}s "
              f"(state {self.state})")
        print("warm-up: one untimed run of each")
        self.plain("tessera")
        self.plain("torchrun")

        plain = {"tessera": [], "torchrun": []}
        for i in range(a.runs):
            for launcher in (("tessera", "torchrun") if i % 2 == 0 else ("torchrun", "tessera")):
                r = self.plain(launcher)
                plain[launcher].append(r)
                extra = f", launch_ms {fmt(r.get('launch_ms'))}" if launcher == "tessera" else ""
                print(f"  run {i + 1} {launcher:8s}: exit {fmt(r['exit'])}, "
                      f"ranks printed {fmt(r['ranks_printed'])}{extra}")
        restarts = {"tessera": [], "torchrun": []}
        for i in range(a.restart_runs):
            for launcher in (("tessera", "torchrun") if i % 2 == 0 else ("torchrun", "tessera")):
                r = self.restart(launcher)
                restarts[launcher].append(r)
                extra = (f", last_restart_ms {fmt(r.get('last_restart_ms'))}"
                         if launcher == "tessera" else "")
                print(f"  restart {i + 1} {launcher:8s}: kill to all ranks restarted "
                      f"{fmt(r['restart_printed'])}{extra}")

        try:
            from torch.distributed.run import get_args_parser
            interval = get_args_parser().get_default("monitor_interval")
            print(f"note: this torchrun checks its workers every {interval} s (--monitor-interval "
                  "default), which bounds how soon it sees them exit or fail")
        except Exception:  # an internal API; the note is only a hint
            pass
        sums = {s for rs in plain.values() for r in rs for s in r["sums"].values()}
        print()
        print(f"final parameters: {'identical' if len(sums) == 1 else 'DIFFERENT'} in every run "
              f"of both launchers ({len(sums)} distinct sha256)")
        print(f"load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print()
        te = median(r["exit"] for r in plain["tessera"])
        tr = median(r["exit"] for r in plain["torchrun"])
        tp = median(r["ranks_printed"] for r in plain["tessera"])
        rp = median(r["ranks_printed"] for r in plain["torchrun"])
        tre = median(r["restart_printed"] for r in restarts["tessera"])
        rre = median(r["restart_printed"] for r in restarts["torchrun"])

        def ratio(x, y):
            return "-" if x is None or y is None or y == 0 else f"{x / y:.2f}x"
        rows = [
            (f"launch-to-exit, median of {a.runs}", fmt(te), fmt(tr), ratio(te, tr)),
            ("command to every rank's first line", fmt(tp), fmt(rp), ratio(tp, rp)),
            ("launch_ms (job status: all ranks running)",
             fmt(median(r.get("launch_ms") for r in plain["tessera"])), "-", "-"),
            (f"restart: kill to every rank restarted, median of {a.restart_runs}",
             fmt(tre), fmt(rre), ratio(tre, rre)),
            ("last_restart_ms (job status)",
             fmt(median(r.get("last_restart_ms") for r in restarts["tessera"])), "-", "-"),
        ]
        width = max(len(r[0]) for r in rows)
        print(f"{'':{width}s}  {'tessera train':>14s}  {'torchrun':>10s}  {'ratio':>7s}")
        for label, x, y, z in rows:
            print(f"{label:{width}s}  {x:>14s}  {y:>10s}  {z:>7s}")
        print()
        print("commands (last timed run of each):")
        print(f"  {shlex.join(map(str, plain['tessera'][-1]['cmd'])) if plain['tessera'] else '-'}")
        print(f"  {shlex.join(map(str, plain['torchrun'][-1]['cmd'])) if plain['torchrun'] else '-'}")
        if restarts["tessera"]:
            print("  restart runs (rank 2 SIGKILLed after the checkpoint at step 10):")
            print(f"  {shlex.join(map(str, restarts['tessera'][-1]['cmd']))}")
            print(f"  {shlex.join(map(str, restarts['torchrun'][-1]['cmd']))}")

    def cleanup(self):
        if self.state.exists() or self.up:
            try:
                subprocess.run([str(self.tessera), "down"], env=self.env, capture_output=True,
                               timeout=90, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                print("train_launch_bench: tessera down timed out", file=sys.stderr)
        # Anything still naming this bench's fresh folder was started by it.
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid() and str(self.base) in cmdline(int(entry)):
                print(f"train_launch_bench: left behind: {entry} {cmdline(int(entry))}", file=sys.stderr)
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.base, ignore_errors=True)


def main():
    args = parse_args()
    if not os.access(args.tessera, os.X_OK):
        print(f"train_launch_bench: {args.tessera} is not an executable", file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"train_launch_bench: {sys.executable} cannot import torch ({e})", file=sys.stderr)
        return 2

    def interrupted(signum, _):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)
    bench = Bench(args)
    try:
        bench.main()
    except KeyboardInterrupt:
        print("train_launch_bench: interrupted", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"train_launch_bench: {e}", file=sys.stderr)
        return 1
    finally:
        bench.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
