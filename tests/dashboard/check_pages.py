#!/usr/bin/env python3
"""Loads every dashboard page in headless Chromium and checks it: no console error, no uncaught
exception or unhandled rejection, no error banner, the texts a page must show, an optional
script's verdict; writes a PNG screenshot per page.

    # against a running head (or any server of the same API):
    python3 tests/dashboard/check_pages.py http://127.0.0.1:8265/ --out /tmp/dash [--token T]
        [--expect nodes=my-node-1 --expect slices=my-slice]
    # against the fixtures, served in-process (adds hash navigation, token and head-down checks):
    python3 tests/dashboard/check_pages.py --serve-fixtures --out /tmp/dash [--nodes 1000]

As a module (for pytest): check_pages(base_url, checks, out_dir, token=None) -> [PageResult];
default_checks(), fixture_checks(), navigation_checks(), large_cluster_checks(n),
registered_node_check(id, devices, type) and run_fixture_suite(out_dir) build on it;
describe(results) says what failed. timed_tab(browser) and measure_page(tab, base_url, route)
time a page's load and its polls (PageTiming).

Chromium is Debian's `chromium` package, driven through the DevTools protocol over
--remote-debugging-pipe (file descriptors 3 and 4, NUL-separated JSON), so nothing beyond the
standard library is needed (python3-websocket is not). One headless browser with one tab, a
small V8 heap, every wait bounded; the browser's process group is killed on every exit path.
Not thread-safe: one Chromium per caller.
"""

import argparse
import atexit
import base64
import dataclasses
import fcntl
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent

try:
    import ctypes
    _libc = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
except OSError:
    _libc = None


class CdpError(RuntimeError):
    pass


def find_chromium():
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise CdpError("no Chromium found: install Debian's `chromium` package (apt-get install -y chromium) "
                   "or set CHROMIUM to its path")


class Chromium:
    """One headless Chromium spoken to over --remote-debugging-pipe. Use as a context manager."""

    def __init__(self, binary=None, window=(1366, 900), timeout_s=20.0, heap_mb=256):
        self.binary = binary or find_chromium()
        self.window = window
        self.timeout_s = timeout_s
        self.heap_mb = heap_mb
        self.proc = None
        self.profile = None
        self.next_id = 0
        self.buffer = b""
        self.replies = {}
        self.events = []  # (sessionId or None, method, params), in arrival order
        self.blank_taken = False

    def start(self):
        self.profile = tempfile.mkdtemp(prefix="tessera-dash-chromium-")
        # fds: we write commands to cmd_w (Chromium reads fd 3), Chromium writes fd 4 to out_r.
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()
        high_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
        high_w = fcntl.fcntl(out_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(cmd_r)
        os.close(out_w)
        args = [
            self.binary, "--headless", "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
            "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-default-apps", "--mute-audio", "--metrics-recording-only",
            "--password-store=basic", "--use-mock-keychain", "--disable-breakpad",
            "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
            "--renderer-process-limit=1", f"--js-flags=--max-old-space-size={self.heap_mb}",
            f"--window-size={self.window[0]},{self.window[1]}", "--hide-scrollbars",
            "--force-color-profile=srgb", "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        self.stderr_path = os.path.join(self.profile, "chromium.stderr")

        def fds_3_and_4():
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
            # Linux: the browser gets SIGKILL when this process dies, even by SIGKILL (its
            # renderers follow it); the wrapper script execs, which keeps the setting.
            if _libc is not None:
                _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                pass_fds=(3, 4), preexec_fn=fds_3_and_4, start_new_session=True)
        os.close(high_r)
        os.close(high_w)
        atexit.register(self.close)
        self.send("Browser.getVersion")
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def stderr_tail(self, lines=15):
        try:
            text = pathlib.Path(self.stderr_path).read_text(errors="replace")
        except OSError:
            return ""
        keep = [l for l in text.splitlines() if "dbus" not in l.lower()]
        return "\n".join(keep[-lines:])

    def _pump(self, deadline):
        """Reads what Chromium wrote until `deadline`; False when the time is up."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        ready, _, _ = select.select([self.out_r], [], [], min(remaining, 0.25))
        if not ready:
            if self.proc.poll() is not None:
                raise CdpError(f"Chromium exited ({self.proc.returncode}): {self.stderr_tail()}")
            return True
        data = os.read(self.out_r, 1 << 20)
        if not data:
            raise CdpError(f"Chromium closed the DevTools pipe: {self.stderr_tail()}")
        self.buffer += data
        while b"\0" in self.buffer:
            raw, self.buffer = self.buffer.split(b"\0", 1)
            message = json.loads(raw)
            if "id" in message:
                self.replies[message["id"]] = message
            else:
                self.events.append((message.get("sessionId"), message.get("method"), message.get("params", {})))
        return True

    def send(self, method, params=None, session=None, timeout_s=None):
        self.next_id += 1
        msg_id = self.next_id
        message = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.cmd_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while msg_id not in self.replies:
            if not self._pump(deadline):
                raise CdpError(f"{method}: no answer from Chromium within {timeout_s or self.timeout_s} s")
        reply = self.replies.pop(msg_id)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def blank_page(self):
        """The about:blank tab Chromium opened at start, once (a renderer fewer than a new tab)."""
        if self.blank_taken:
            return None
        self.blank_taken = True
        for info in self.send("Target.getTargets").get("targetInfos", []):
            if info.get("type") == "page" and info.get("url") == "about:blank" and not info.get("attached"):
                return info["targetId"]
        return None

    def wait(self, seconds):
        """Lets events arrive for `seconds`."""
        deadline = time.monotonic() + seconds
        while self._pump(deadline):
            pass

    def close(self):
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.write(self.cmd_w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                    proc.wait(timeout=3)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the renderer, zygote and utility processes too
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for fd in (self.cmd_w, self.out_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None


class Tab:
    """One page target with Runtime, Log and Page domains on, collecting its errors."""

    def __init__(self, browser, token=None):
        self.browser = browser
        self.target = browser.blank_page() or browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
        self.seen = 0
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        if token is not None:
            self.send("Page.addScriptToEvaluateOnNewDocument", {
                "source": f"try {{ sessionStorage.setItem('tessera.token', {json.dumps(token)}); }} catch (e) {{}}"})

    def send(self, method, params=None, timeout_s=None):
        return self.browser.send(method, params, session=self.session, timeout_s=timeout_s)

    def close(self):
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target})
        except CdpError:
            pass

    def navigate(self, url):
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression, timeout_s=10.0):
        result = self.send("Runtime.evaluate", {
            "expression": expression, "awaitPromise": True, "returnByValue": True, "timeout": int(timeout_s * 1000),
        }, timeout_s=timeout_s + 5)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text", "exception")
            raise CdpError(f"script failed: {text.splitlines()[0]}")
        return result.get("result", {}).get("value")

    def take_errors(self):
        """Console errors, uncaught exceptions and unhandled rejections since the last call."""
        errors = []
        events = self.browser.events
        for session, method, params in events[self.seen:]:
            if session != self.session:
                continue
            if method == "Runtime.exceptionThrown":
                d = params.get("exceptionDetails", {})
                text = d.get("exception", {}).get("description") or d.get("text", "")
                errors.append(f"uncaught: {text.splitlines()[0] if text else 'exception'} ({d.get('url', '')}:{d.get('lineNumber', '')})")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                words = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
                errors.append(f"console.{params.get('type')}: {' '.join(words)}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                errors.append(f"{entry.get('source', 'log')}: {entry.get('text', '')} {entry.get('url', '')}".strip())
        self.seen = len(events)
        return errors

    def screenshot(self, path, max_height=4000):
        metrics = self.send("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics.get("contentSize")
        width = max(1, int(size["width"]))
        height = max(1, min(int(size["height"]), max_height))
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        }, timeout_s=30)
        pathlib.Path(path).write_bytes(base64.b64decode(shot["data"]))


@dataclasses.dataclass
class PageCheck:
    name: str                      # also the screenshot's file name
    route: str                     # "#/nodes"
    expect: list = dataclasses.field(default_factory=list)  # texts the page must show
    # A JS expression (a Promise is awaited) run once the texts show: true passes, a string says
    # what is wrong.
    script: str = ""
    allowed_errors: list = dataclasses.field(default_factory=list)  # regexes of tolerated errors
    allow_banner: bool = False     # the error banner may show (the head-down check)
    fresh_load: bool = True        # load the page anew (else stay on the page, changing only the hash)
    wait_ready: bool = True        # wait for the first poll's end (not while a token dialog waits)
    token: object = None           # None: the run's token; "": none at all
    settle_s: float = None         # seconds to watch after the texts show (None: the run's)


@dataclasses.dataclass
class PageResult:
    name: str
    url: str
    errors: list
    missing: list
    problem: str
    screenshot: str
    seconds: float
    note: str = ""

    @property
    def ok(self):
        return not self.errors and not self.missing and not self.problem


STATE_PROBE = """(() => {
  const main = document.getElementById('page');
  const banner = document.getElementById('banner');
  const text = document.body ? document.body.innerText : '';
  return {
    // The app has routed to the address shown (a hash change is handled a task later).
    state: main && main.dataset.route === location.hash ? main.dataset.state : 'routing',
    banner: banner && !banner.hidden ? banner.textContent : '',
    missing: %s.filter((t) => !text.includes(t)),
  };
})()"""


def check_page(tab, base_url, check, out_dir, timeout_s=20.0, settle_s=2.5):
    """Loads one page and judges it. Never raises for what the page does: a failure is in the
    result (a broken browser still raises CdpError)."""
    url = base_url.split("#")[0] + check.route
    started = time.monotonic()
    problem = ""
    note = ""
    tab.take_errors()
    if check.fresh_load:
        tab.navigate("about:blank")
        tab.browser.wait(0.2)
        tab.navigate(url)
    else:
        tab.evaluate(f"if (location.hash !== {json.dumps(check.route)}) location.hash = {json.dumps(check.route)}; true")
    probe = STATE_PROBE % json.dumps(check.expect)
    deadline = time.monotonic() + timeout_s
    status = {}
    while time.monotonic() < deadline:
        try:
            status = tab.evaluate(probe) or {}
        except CdpError:
            status = {}  # the document is being replaced
        ready = status.get("state") in ("ready", "error") or (
            not check.wait_ready and status.get("state") not in (None, "", "routing"))
        if ready and not status.get("missing"):
            break
        tab.browser.wait(0.2)
    else:
        problem = f"page not ready within {timeout_s} s (state {status.get('state')!r})"
    if not problem and check.script:
        try:
            verdict = tab.evaluate(check.script, timeout_s=timeout_s)
            if isinstance(verdict, dict):
                note = verdict.get("note", "")
                verdict = verdict.get("ok")
            if verdict is not True:
                problem = f"script: {verdict}"
        except CdpError as error:
            problem = str(error)
    # One more poll (or two) to catch errors of an update in place; the texts must still show,
    # unless a script changed what the page shows.
    tab.browser.wait(settle_s if check.settle_s is None else check.settle_s)
    try:
        after = tab.evaluate(probe) or {}
        if not check.script:
            status = after
        status["banner"] = after.get("banner", "")
    except CdpError as error:
        problem = problem or str(error)
    if status.get("banner") and not check.allow_banner:
        problem = problem or f"error banner: {status['banner']}"
    shot = ""
    if out_dir:
        shot = str(pathlib.Path(out_dir) / f"{check.name}.png")
        try:
            tab.screenshot(shot)
        except CdpError as error:
            problem = problem or f"screenshot: {error}"
            shot = ""
    errors = [e for e in tab.take_errors() if not any(re.search(p, e) for p in check.allowed_errors)]
    return PageResult(check.name, url, errors, list(status.get("missing", check.expect)), problem, shot,
                      round(time.monotonic() - started, 2), note)


def check_pages(base_url, checks, out_dir=None, token=None, timeout_s=20.0, settle_s=2.5, browser=None):
    """Runs `checks` in one tab per distinct token of one Chromium; returns a PageResult each."""
    if out_dir:
        pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    own = browser is None
    browser = browser or Chromium().start()
    tabs = {}
    try:
        results = []
        for check in checks:
            tab_token = token if check.token is None else (check.token or None)
            if tab_token not in tabs:
                tabs[tab_token] = Tab(browser, tab_token)
            results.append(check_page(tabs[tab_token], base_url, check, out_dir, timeout_s, settle_s))
        return results
    finally:
        if own:
            browser.close()
        else:
            for tab in tabs.values():
                tab.close()


def describe(results):
    lines = []
    for r in results:
        mark = "ok  " if r.ok else "FAIL"
        lines.append(f"{mark} {r.name:<14} {r.seconds:5.1f} s  {r.url}{('  ' + r.note) if r.note else ''}")
        for e in r.errors:
            lines.append(f"       error: {e}")
        if r.missing:
            lines.append(f"       missing text: {r.missing}")
        if r.problem:
            lines.append(f"       {r.problem}")
        if r.screenshot:
            lines.append(f"       screenshot: {r.screenshot}")
    return "\n".join(lines)


# --- The checks -------------------------------------------------------------------------------

def default_checks(expect=None):
    """Every page, needing only its heading; expect: {page name: [texts]} adds texts."""
    expect = expect or {}
    pages = [("overview", "#/overview", "Cluster overview"), ("nodes", "#/nodes", "Nodes"),
             ("slices", "#/slices", "Slices"), ("reservations", "#/reservations", "Reservations"),
             ("jobs", "#/jobs", "Jobs"), ("actors", "#/actors", "Actors"), ("events", "#/events", "Events"),
             ("serve", "#/serve", "Serve")]
    return [PageCheck(name, route, [heading] + list(expect.get(name, []))) for name, route, heading in pages]


def _js_wait(condition, what, timeout_ms=8000):
    """A script that waits (polling) for a JS condition, then passes or says `what` failed."""
    return f"""new Promise((resolve) => {{
  const end = Date.now() + {timeout_ms};
  const tick = () => {{
    let ok = false;
    try {{ ok = Boolean({condition}); }} catch (e) {{ ok = false; }}
    if (ok) resolve(true);
    else if (Date.now() > end) resolve({json.dumps(what)});
    else setTimeout(tick, 100);
  }};
  tick();
}})"""


FILTER_NODES = """(() => {
  const input = document.getElementById('node-filter');
  input.value = %s;
  input.dispatchEvent(new Event('input', {bubbles: true}));
  return document.querySelectorAll('#node-table tbody tr:not(.empty)').length;
})()"""


def fixture_checks():
    """What the fixtures (tests/dashboard/fixtures) must show on each page."""
    rows = "document.querySelectorAll('#node-table tbody tr:not(.empty)').length"
    return [
        PageCheck("overview", "#/overview",
                  ["Cluster overview", "5 / 6", "1 dead", "cpu-0", "eval-sweep", "no node has 8 GPU free",
                   "infeasible", "declared dead", "TPU", "16 / 16"]),
        PageCheck("nodes", "#/nodes",
                  ["h100-0", "cpu-0", "v6e-0-w0", "v6e-0-w3", "8 × H100", "4 × TPU-V6E", "6 nodes, 5 alive",
                   "v6e-0 w2"],
                  script=f"({FILTER_NODES % json.dumps('v6e')}) === 4 ? true : 'filter v6e did not leave 4 rows'"),
        PageCheck("node-h100", "#/nodes/h100-0",
                  ["h100-0", "alive", "10.0.0.10:7701", "ibp7", "GPU 7", "team=ml-infra", "Last 60 samples"],
                  script=_js_wait("document.querySelectorAll('.hw g.device').length === 8"
                                  " && document.querySelectorAll('.hw g.link-group').length === 28"
                                  " && document.querySelectorAll('.hw .numa').length === 2"
                                  " && document.querySelectorAll('.spark path.line').length === 16"
                                  " && [...document.querySelectorAll('.hw g.link-group title')].some((t) => t.textContent.includes('nvswitch, 18 lanes, 450 GB/s'))",
                                  "hardware view: want 8 devices, 28 nvswitch links in 2 NUMA groups, 16 sparklines")),
        PageCheck("node-tpu", "#/nodes/v6e-0-w0",
                  ["v6e-0-w0", "TPU 3", "n/a", "tessera.io/tpu-worker-id=0", "eth0"],
                  script=_js_wait("document.querySelectorAll('.hw g.device').length === 4"
                                  " && document.querySelectorAll('.hw g.link-group').length === 4",
                                  "hardware view: want 4 chips and 4 ICI links")),
        PageCheck("slices", "#/slices",
                  ["v6e-0", "intact", "job-7c1e2a90-1", "llama-v6e-pretrain", "16 ranks", "worker 0", "worker 3",
                   "v6e-0-w3", "4 hosts, 4 alive"],
                  script=_js_wait("(() => { const cells = [...document.querySelectorAll('.host-cell')];"
                                  " const w3 = cells.find((c) => c.textContent.includes('worker 3'));"
                                  " return cells.length === 4 && w3.style.gridColumn.startsWith('2') && w3.style.gridRow.startsWith('2'); })()",
                                  "slice grid: want 4 hosts in a 2x2 grid, worker 3 at column 2, row 2")),
        PageCheck("reservations", "#/reservations",
                  ["serve-llm", "eval-sweep", "unplaced", "job-7c1e2a90-1", "llama-v6e-pretrain", "created",
                   "pending", "reserved", "2 / 2", "0 / 1"]),
        PageCheck("jobs", "#/jobs",
                  ["llama-v6e-pretrain", "resnet-smoke", "running", "succeeded", "1 / 3", "driver-2b7d40",
                   "presumed"],
                  script=_js_wait("document.querySelectorAll('.rank-dot').length === 18", "want 16 + 2 rank squares")),
        PageCheck("job-detail", "#/jobs/job-7c1e2a90?rank=3",
                  ["llama-v6e-pretrain", "16 (16 running)", "v6e-0-w3", "[rank 3] step", "following"],
                  script=_js_wait("document.querySelectorAll('table tbody tr').length >= 16"
                                  " && document.getElementById('log-rank').value === '3'",
                                  "want 16 rank rows and the log of rank 3")),
        PageCheck("actors", "#/actors", ["llm-server", "tokenizer", "node cpu-0 was declared dead", "detached"]),
        PageCheck("serve", "#/serve",
                  ["Serve", "summarizer", "LLMServer:llama-3-8b", "OpenAiIngress", "healthy", "deploying",
                   "held by placement group serve-llm", "51234", "llm#LLMServer:llama-3-8b#p7m3d8rt",
                   "llama-3-8b", "1,535", "850 ms", "85 ms", "21 ms", "2.3 s", "37%", "190,400", "3 / 4",
                   "1 waiting for resources", "10.0.0.1:8000"],
                  script=_js_wait("document.querySelectorAll('main table').length === 5"
                                  " && [...document.querySelectorAll('main td a')].some((a) => a.textContent === 'h100-0')",
                                  "want 5 tables and replicas linked to their node")),
        PageCheck("events", "#/events", ["Events", "declared dead", "eval-sweep", "node · notice"],
                  script=_js_wait("(() => { const seqs = [...document.querySelectorAll('tbody tr td:first-child')]"
                                  ".map((td) => Number(td.textContent)); return seqs.length >= 25"
                                  " && seqs.every((s, i) => i === 0 || seqs[i - 1] > s); })()",
                                  "want at least 25 events, newest first")),
    ]


def large_cluster_checks(nodes, filter_text="node-09"):
    """The nodes page with `nodes` nodes: 50 rows of DOM, paging, and how long a filter takes
    (filtering by `filter_text`, which must match at least one node)."""
    measure = """(() => {
  const rows = () => document.querySelectorAll('#node-table tbody tr:not(.empty)').length;
  const before = rows();
  const t0 = performance.now();
  const matched = %s;
  const filterMs = performance.now() - t0;
  const input = document.getElementById('node-filter');
  input.value = ''; input.dispatchEvent(new Event('input', {bubbles: true}));
  const t1 = performance.now();
  const next = [...document.querySelectorAll('.pager button')].find((b) => b.textContent.includes('Next'));
  next.click();
  const pageMs = performance.now() - t1;
  const second = document.querySelector('#node-table tbody tr td a').textContent;
  const svgs = document.querySelectorAll('svg').length;
  const ok = before === 50 && rows() === 50 && matched > 0 && matched <= 50 && svgs === 0;
  const poll = document.getElementById('page').dataset.pollMs;
  return {ok: ok || `rows ${before}/${rows()}, matched ${matched}, svgs ${svgs}`,
          note: `poll ${poll} ms, filter ${filterMs.toFixed(1)} ms, next page ${pageMs.toFixed(1)} ms (first row ${second})`};
})()""" % (FILTER_NODES % json.dumps(filter_text))
    return [
        PageCheck("nodes-large", "#/nodes", [f"{nodes:,} nodes", "rows 1–50"], script=measure),
        PageCheck("overview-large", "#/overview", ["Cluster overview", f"/ {nodes:,}".replace(",", "")]),
    ]


def registered_node_check(node_id, devices, accelerator_type):
    """The page of one node a head registered with `devices` devices of `accelerator_type` on one
    NVSwitch in two NUMA groups, each device measured (fill_head_registry's nodes): the hardware
    view draws every device and link, and each device has its two sparklines."""
    links = devices * (devices - 1) // 2
    return PageCheck(
        f"node-{node_id}", f"#/nodes/{node_id}",
        [node_id, "alive", f"{devices} × {accelerator_type}", f"GPU {devices - 1}", "Last"],
        script=_js_wait(f"document.querySelectorAll('.hw g.device').length === {devices}"
                        f" && document.querySelectorAll('.hw g.link-group').length === {links}"
                        " && document.querySelectorAll('.hw .numa').length === 2"
                        f" && document.querySelectorAll('.spark path.line').length === {2 * devices}",
                        f"hardware view: want {devices} devices, {links} links in 2 NUMA groups, "
                        f"{2 * devices} sparklines"))


def navigation_checks():
    """Every page again in one document, moving by hash only (each page's dispose and the next
    page's start), then the pages of what is not there: an unknown route, node and job, a node
    without devices, and the merged log of an ended job."""
    tour = [PageCheck(f"{c.name}-by-hash", c.route, c.expect, fresh_load=False, settle_s=0.5)
            for c in fixture_checks()]
    tour[0].fresh_load = True
    return tour + [
        PageCheck("unknown-route", "#/no-such-page", ["Cluster overview"], fresh_load=False, settle_s=0.5),
        PageCheck("unknown-node", "#/nodes/no-such-node", ["The head lists no node no-such-node"],
                  fresh_load=False, settle_s=0.5),
        PageCheck("node-without-devices", "#/nodes/cpu-0", ["This node reports no accelerator devices", "dead"],
                  fresh_load=False, settle_s=0.5),
        PageCheck("unknown-job", "#/jobs/no-such-job", ["The head lists no gang job no-such-job"],
                  fresh_load=False, settle_s=0.5),
        PageCheck("merged-log", "#/jobs/job-0b5d33f1?rank=-1", ["[rank 0] done", "[rank 1] done", "ended"],
                  settle_s=0.5),
    ]


def token_checks():
    """A head that needs a token: the page asks once (dialog), then shows the cluster."""
    fill = """(() => {
  const dialog = document.getElementById('token-dialog');
  if (!dialog.open) return 'no token dialog';
  document.getElementById('token-input').value = 'fixture-token';
  document.getElementById('token-form').requestSubmit();
  return true;
})()"""
    then = _js_wait("document.body.innerText.includes('v6e-0-w3') && !document.getElementById('token-dialog').open"
                    " && sessionStorage.getItem('tessera.token') === 'fixture-token' && !location.href.includes('fixture-token')",
                    "after the token: want the nodes, the dialog closed, the token in sessionStorage only")
    return [PageCheck("token", "#/nodes", ["This cluster needs a token"],
                      script=f"(async () => {{ const a = {fill}; if (a !== true) return a; return await {then}; }})()",
                      allowed_errors=[r"status of 401"], token="", wait_ready=False)]


def head_down_check():
    return PageCheck("head-down", "#/overview", ["Cannot reach the head"], allow_banner=True, fresh_load=False,
                     allowed_errors=[r"ERR_CONNECTION_REFUSED", r"ERR_CONNECTION_RESET", r"ERR_EMPTY_RESPONSE"])


def run_fixture_suite(out_dir, nodes=None, timeout_s=20.0):
    """Serves the fixtures in-process and runs every fixture check, the token check and (last)
    the head-down check; returns the results."""
    sys.path.insert(0, str(HERE))
    import serve_fixtures  # noqa: E402 (beside this file)

    results = []
    with Chromium() as browser:
        server = serve_fixtures.start_server(nodes=nodes)
        try:
            checks = fixture_checks() if not nodes else large_cluster_checks(nodes)
            results += check_pages(server.url, checks, out_dir, timeout_s=timeout_s, browser=browser)
            if not nodes:
                results += check_pages(server.url, navigation_checks(), None, timeout_s=timeout_s, browser=browser)
        finally:
            server.stop()
        if not nodes:
            with serve_fixtures.start_server(token="fixture-token") as guarded:
                results += check_pages(guarded.url, token_checks(), out_dir, timeout_s=timeout_s, browser=browser)
            # Load the overview, then stop the server under it: the banner must say so.
            server = serve_fixtures.start_server()
            tab = Tab(browser)
            try:
                first = check_page(tab, server.url, PageCheck("overview-before-down", "#/overview", ["cpu-0"]),
                                   None, timeout_s, settle_s=0.5)
            finally:
                server.stop()
            if not first.ok:
                results.append(first)
            results.append(check_page(tab, server.url, head_down_check(), out_dir, timeout_s, settle_s=0.5))
            tab.close()
    return results


# --- Timings -------------------------------------------------------------------------------

# Installed before each document of a timed tab: records when #page first reads "ready" (the
# first poll's end, from the navigation's start) and every poll's data-poll-ms (app.js sets it
# after each poll, fetches included) with when it ended.
TIMING_RECORDER = """(() => {
  window.__tesseraPolls = [];
  window.__tesseraReadyMs = null;
  new MutationObserver((records) => {
    for (const r of records) {
      const el = r.target;
      if (!el || el.id !== 'page') continue;
      if (r.attributeName === 'data-poll-ms') {
        window.__tesseraPolls.push({end: performance.now(), ms: Number(el.dataset.pollMs)});
      } else if (el.dataset.state === 'ready' && window.__tesseraReadyMs === null) {
        window.__tesseraReadyMs = performance.now();
      }
    }
  }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-poll-ms', 'data-state']});
})();"""

TIMING_READ = """(() => ({
  ready: window.__tesseraReadyMs,
  polls: window.__tesseraPolls || [],
  fetches: performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/api/v1/'))
    .map((e) => ({path: new URL(e.name).pathname, start: e.startTime, end: e.responseEnd})),
  route: (document.getElementById('page') || {dataset: {}}).dataset.route || '',
}))()"""


@dataclasses.dataclass
class PageTiming:
    route: str
    load_ms: float   # navigation start to the end of the first poll (the page shown)
    polls: list      # later polls: {"ms": whole poll, "fetch_ms": its fetches' span, "rest_ms": ms - fetch_ms}
    fetch_ms: dict   # API path -> [ms of each fetch] (the browser's resource timing)
    errors: list     # console errors and exceptions while measured

    def median(self, key):
        values = sorted(p[key] for p in self.polls)
        return values[len(values) // 2] if values else float("nan")


def timed_tab(browser, token=None):
    """A tab that records each page's load and poll times (measure_page reads them)."""
    tab = Tab(browser, token)
    tab.send("Page.addScriptToEvaluateOnNewDocument", {"source": TIMING_RECORDER})
    return tab


def measure_page(tab, base_url, route, polls=5, timeout_s=60.0):
    """Loads `route` afresh in a timed_tab and waits for `polls` polls after the first; returns
    a PageTiming. CdpError when the page is not ready or the polls do not come within timeout_s."""
    tab.take_errors()
    tab.navigate("about:blank")
    tab.browser.wait(0.2)
    tab.navigate(base_url.split("#")[0] + route)
    deadline = time.monotonic() + timeout_s
    read = {}
    while time.monotonic() < deadline:
        try:
            read = tab.evaluate(TIMING_READ) or {}
        except CdpError:
            read = {}  # the document is being replaced
        if read.get("route") == route and read.get("ready") is not None and len(read.get("polls", [])) > polls:
            break
        tab.browser.wait(0.25)
    else:
        raise CdpError(f"{route}: {len(read.get('polls', []))} polls within {timeout_s} s, want {polls + 1}")
    fetches = read.get("fetches", [])
    by_path = {}
    for f in fetches:
        by_path.setdefault(f["path"], []).append(round(f["end"] - f["start"], 1))
    later = []
    for p in read["polls"][1:polls + 1]:
        start = p["end"] - p["ms"]
        inside = [f for f in fetches if f["start"] >= start - 1 and f["end"] <= p["end"] + 1]
        span = (max(f["end"] for f in inside) - min(f["start"] for f in inside)) if inside else 0.0
        later.append({"ms": round(p["ms"], 1), "fetch_ms": round(span, 1), "rest_ms": round(p["ms"] - span, 1)})
    return PageTiming(route, round(read["ready"], 1), later, by_path, tab.take_errors())


def _parse_expect(items):
    expect = {}
    for item in items or []:
        name, _, text = item.partition("=")
        if not text:
            raise SystemExit(f"--expect wants PAGE=TEXT, got {item!r}")
        expect.setdefault(name, []).append(text)
    return expect


def main():
    parser = argparse.ArgumentParser(description="Check the dashboard's pages in headless Chromium.")
    parser.add_argument("base_url", nargs="?", help="where the dashboard is served, e.g. http://127.0.0.1:8265/")
    parser.add_argument("--out", default="dashboard-screenshots", help="folder for the PNG screenshots")
    parser.add_argument("--token", default=None, help="the cluster token (put in sessionStorage)")
    parser.add_argument("--expect", action="append", help="PAGE=TEXT: the page must show TEXT (repeatable)")
    parser.add_argument("--fixtures", action="store_true", help="base_url serves the fixtures: check their texts")
    parser.add_argument("--serve-fixtures", action="store_true", help="serve the fixtures here and check them")
    parser.add_argument("--nodes", type=int, default=None, help="with --serve-fixtures: N nodes, check the nodes page")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a page may take to show its texts")
    args = parser.parse_args()

    # SIGTERM (a test runner's timeout) must still kill Chromium: make it an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.serve_fixtures:
        results = run_fixture_suite(args.out, nodes=args.nodes, timeout_s=args.timeout)
    elif args.base_url:
        checks = fixture_checks() if args.fixtures else default_checks(_parse_expect(args.expect))
        results = check_pages(args.base_url, checks, args.out, token=args.token, timeout_s=args.timeout)
    else:
        parser.error("give a base URL or --serve-fixtures")
    print(describe(results))
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
