"""The head's HTTP endpoint tried as another local user and a flood would try it (issue 29), on a
real head started by `tessera start --head` (no agents: cheap):
- another local user (`setpriv` to nobody, when running as root) reads neither a job's log nor
  the nodes over HTTP, while the cluster's user, with the token, reads the log;
- 80 connections trickling their request heads at a byte a second do not delay /metrics or the
  dashboard's page;
- `tessera dashboard` prints a one-time login URL, and `--open` hands the browser a 0600 page
  rather than the ticket in its arguments.
Tests that cannot run (not root, no setpriv) skip with the reason."""
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESSERA = os.environ.get("TESSERA_BIN", str(REPO / "build" / "bin" / "tessera"))
SECRET = "db-password=hunter2-issue29"


def run(*args, timeout=60, env=None):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL, env=env)
    assert result.returncode == 0, f"{' '.join(map(str, args))}: {result.stdout}{result.stderr}"
    return result


def request(url, token=None, method="GET", headers=None, timeout=10):
    """(status, body) of one request."""
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers),
                                    timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def head():
    root = Path(tempfile.mkdtemp(prefix="tessera-http-privacy-", dir="/tmp"))
    os.chmod(root, 0o755)  # so that another user may try the state folder below it
    state = root / "state"
    args = ["--state-dir", state]
    run(TESSERA, "start", "--head", *args, "--http-port", "0")
    try:
        # A job (pending: no agents) whose log holds what a job may print.
        submitted = run(TESSERA, "job", "submit", "--name", "private", *args, "--", "/bin/true")
        job = submitted.stdout.strip().splitlines()[-1].split()[-1]
        with open(state / "jobs" / job / "job.log", "a") as log:
            log.write(SECRET + "\n")
        yield {"state": state, "args": args, "job": job,
               "http": (state / "head.http").read_text().strip(),
               "token": (state / "token").read_text().strip()}
    finally:
        subprocess.run([TESSERA, "down", *map(str, args)], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def test_the_clusters_user_reads_a_job_log_with_the_token_and_nobody_without(head):
    logs = f"http://{head['http']}/api/v1/jobs/{head['job']}/logs"
    status, body = request(logs, head["token"])
    assert status == 200 and SECRET in json.loads(body)["data"]
    for target in (logs, f"http://{head['http']}/api/v1/nodes", f"http://{head['http']}/metrics"):
        status, body = request(target)
        assert status == 401, target
        assert SECRET not in body


def test_another_local_user_cannot_read_job_logs_over_http(head):
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user (setpriv --reuid=nobody)")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv is not installed (util-linux)")
    probe = f"""
import json, urllib.request, urllib.error
out = {{}}
for name, url in (("logs", "http://{head['http']}/api/v1/jobs/{head['job']}/logs"),
                  ("nodes", "http://{head['http']}/api/v1/nodes")):
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            out[name] = [reply.status, reply.read().decode()]
    except urllib.error.HTTPError as error:
        out[name] = [error.code, error.read().decode()]
for name, path in (("token", "{head['state']}/token"),
                   ("file", "{head['state']}/jobs/{head['job']}/job.log")):
    try:
        out[name] = open(path).read()
    except OSError as error:
        out[name] = type(error).__name__
print(json.dumps(out))
"""
    result = subprocess.run([setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                             "/usr/bin/python3", "-c", probe],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["token"] == "PermissionError" and seen["file"] == "PermissionError", seen
    assert seen["logs"][0] == 401 and SECRET not in seen["logs"][1], seen
    assert seen["nodes"][0] == 401, seen


def test_slow_clients_trickling_their_heads_do_not_delay_scrapes_or_the_dashboard(head):
    host, port = head["http"].rsplit(":", 1)
    slow = []
    for _ in range(80):
        s = socket.create_connection((host, int(port)), timeout=5)
        slow.append(s)
    stop = threading.Event()

    def trickle():
        line = b"GET /metrics HTTP/1.1\r\nX-Slow: "
        i = 0
        while not stop.wait(1.0):
            for s in slow:
                try:
                    s.send(line[i % len(line):i % len(line) + 1])
                except OSError:
                    pass
            i += 1

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        slowest, answered = 0.0, 0
        end = time.monotonic() + 4
        while time.monotonic() < end:
            began = time.monotonic()
            assert request(f"http://{head['http']}/metrics", head["token"], timeout=5)[0] == 200
            assert request(f"http://{head['http']}/", timeout=5)[0] == 200
            slowest = max(slowest, time.monotonic() - began)
            answered += 1
            time.sleep(0.2)
        assert answered >= 10 and slowest < 1.0, (answered, slowest)
    finally:
        stop.set()
        thread.join()
        for s in slow:
            s.close()


def test_tessera_dashboard_prints_a_one_time_login_and_opens_it_through_a_private_page(head, tmp_path):
    url = run(TESSERA, "dashboard", *head["args"]).stdout.split()[0]
    prefix = f"http://{head['http']}/#login="
    assert url.startswith(prefix)
    ticket = url[len(prefix):]
    assert ticket != head["token"]
    sessions = f"http://{head['http']}/api/v1/sessions"
    status, body = request(sessions, method="POST", headers={"X-Tessera-Login-Ticket": ticket})
    assert status == 200, body
    session = json.loads(body)["session"]
    assert request(f"http://{head['http']}/api/v1/nodes", session)[0] == 200
    assert request(sessions, method="POST", headers={"X-Tessera-Login-Ticket": ticket})[0] == 403

    # --open: the browser gets a file of this user only, never the ticket in its arguments.
    browser = tmp_path / "browser"
    seen = tmp_path / "argv"
    browser.write_text(f"#!/bin/sh\necho \"$@\" > {seen}\n")
    browser.chmod(0o700)
    run(TESSERA, "dashboard", "--open", *head["args"], env={**os.environ, "BROWSER": str(browser)})
    page = head["state"] / "dashboard-open.html"
    assert seen.read_text().strip() == f"file://{page}"
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert prefix in page.read_text()
