"""tessera.serve.llm end to end on a local cluster (two_nodes.yaml): build_openai_app over the
built-in engine, served through the C++ proxy, exercised by the official OpenAI client library
(npm `openai`, run with Node.js) and by curl: the model list, chat and text completions plain and
streamed (`data: ...` events, the usage chunk of stream_options.include_usage, one
`data: [DONE]`), and a validation error's body and status.

The model is the demo model's architecture trained for a few steps into a temporary folder (a
few seconds): what it says does not matter, the shapes and counts do.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import tessera
from conftest import run_tiny_llm_app

serve = pytest.importorskip("tessera.serve")
pytest.importorskip("torch")
pytest.importorskip("fastapi")

HERE = Path(__file__).resolve().parent
NPM_PREFIX = os.environ.get("TESSERA_NPM_PREFIX", "/usr/local/lib/tessera-npm")


@pytest.fixture(scope="module")
def base_url(cluster, tmp_path_factory):
    base = run_tiny_llm_app(tmp_path_factory)
    yield base
    serve.shutdown()


def curl(*args):
    result = subprocess.run(["curl", "-sS", "-N", "--max-time", "60", *args],
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(shutil.which("node") is None or not os.path.isdir(
    os.path.join(NPM_PREFIX, "node_modules", "openai")),
    reason="needs node and the openai npm package (scripts/setup installs it)")
def test_the_official_openai_client_through_the_proxy(base_url):
    result = subprocess.run(["node", str(HERE / "openai_client.mjs"), base_url, "tiny"],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ok"] and summary["models"] == ["tiny"]
    assert summary["chat"]["usage"]["completion_tokens"] == 8
    assert summary["chat"]["stream_chunks"] >= 2
    assert summary["completion"]["usage"]["completion_tokens"] == 8


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl (scripts/setup installs it)")
def test_a_streamed_chat_completion_with_curl(base_url):
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Hello"}],
                       "max_tokens": 6, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    text = curl("-H", "Content-Type: application/json", "-d", body,
                f"{base_url}/v1/chat/completions")
    events = [line[len("data: "):] for line in text.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = [json.loads(event) for event in events[:-1]]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 6
    assert usage["usage"]["total_tokens"] == (usage["usage"]["prompt_tokens"] + 6)
    last = chunks[-2]["choices"][0]
    assert last["finish_reason"] == "length"


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl (scripts/setup installs it)")
def test_an_invalid_request_is_a_400_with_openais_error_shape(base_url):
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}],
                       "temperature": 7})
    text = curl("-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-d", body,
                f"{base_url}/v1/chat/completions")
    payload, status = text.rsplit("\n", 1)
    assert status == "400"
    error = json.loads(payload)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"].startswith("Invalid request format:")
    unknown = curl("-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-d",
                   json.dumps({"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
                   f"{base_url}/v1/chat/completions")
    assert unknown.rsplit("\n", 1)[1] == "404"
