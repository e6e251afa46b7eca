"""A real Prometheus (Debian's `prometheus`) scraping a cluster through the head's file_sd
targets file and its scrape token, for the tests that read what it stored:

    with prometheus_scraping(state_dir, tmp_path) as prometheus:
        up = wait_for(lambda: prometheus.query("up == 1"), 90, "targets up")

`query` answers a PromQL expression's result list, [] while Prometheus is not up yet (or the
expression has no result); `raw_query` the whole answer, a rejected query's 400 included. The
server is stopped on leaving the block. The caller skips when `find_prometheus()` is None.
"""
import contextlib
import json
import shutil
import socket
import subprocess
import textwrap
import urllib.error
import urllib.parse
import urllib.request


def find_prometheus():
    return shutil.which("prometheus")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, port):
        self.port = port

    def raw_query(self, expr):
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expr}))
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read().decode())
        except urllib.error.HTTPError as error:  # 400: Prometheus rejected the query
            return {"status": "error", "error": error.read().decode()}

    def query(self, expr):
        try:
            answer = self.raw_query(expr)
        except OSError:
            return []
        return answer["data"]["result"] if answer.get("status") == "success" else []


@contextlib.contextmanager
def prometheus_scraping(state_dir, tmp_path):
    config = tmp_path / "prometheus.yml"
    config.write_text(textwrap.dedent(f"""
        global: {{scrape_interval: 1s, evaluation_interval: 1s}}
        scrape_configs:
          - job_name: tessera
            file_sd_configs:
              - files: ["{state_dir}/prometheus/targets.json"]
            authorization:
              credentials_file: "{state_dir}/scrape-token"
    """))
    port = _free_port()
    with open(tmp_path / "prometheus.log", "w") as log:
        server = subprocess.Popen([find_prometheus(), f"--config.file={config}",
                                   f"--storage.tsdb.path={tmp_path / 'data'}",
                                   f"--web.listen-address=127.0.0.1:{port}",
                                   "--storage.tsdb.retention.time=1h"],
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            yield Prometheus(port)
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
