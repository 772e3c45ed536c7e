"""Starts `qserve serve` on a free port for the server tests and talks to it
with the standard library (raw HTTP) next to the official openai client."""
import http.client
import json
import os
import pathlib
import re
import signal
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
API_KEY = "test-key-123"


def qserve_binary():
    path = pathlib.Path(os.environ.get("QSERVE_BIN", ROOT / "build" / "qserve"))
    if not path.exists():
        pytest.skip(f"skipped: {path} not built (scripts/build.sh cpu)")
    return path


def default_model_dir():
    home = pathlib.Path(os.environ.get("QSERVE_HOME", pathlib.Path.home() / ".cache" / "qserve"))
    return home / "models" / "SmolLM2-135M-Instruct"


class Server:
    """A running `qserve serve`; stop() sends SIGTERM and waits."""

    def __init__(self, *extra_args, api_key=API_KEY, startup_timeout=300):
        if not default_model_dir().exists() and "--model" not in extra_args:
            pytest.skip(f"skipped: default model not installed at {default_model_dir()} (scripts/install_model.sh)")
        args = [str(qserve_binary()), "serve", "--port", "0"]
        if api_key:
            args += ["--api-key", api_key]
        args += list(extra_args)
        self.api_key = api_key
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.stderr_lines = []
        self.port = None
        deadline = time.time() + startup_timeout
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr_lines.append(line)
            m = re.search(r"at http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            rest = self.proc.stderr.read()
            text = "".join(self.stderr_lines) + rest
            if "not built yet" in text:
                pytest.skip("skipped: the engine cannot load real checkpoints yet: " + text.strip().splitlines()[-1])
            raise RuntimeError(f"qserve serve did not start: {text}")
        # Keep draining stderr so the server never blocks on a full pipe.
        import threading
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.port}"
        status, body = self.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 1})
        if status == 400 and "tokenizer" in json.dumps(body):
            self.stop()
            pytest.skip("skipped: the engine serves token ids only (no tokenizer wired): " + body["error"]["message"])

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def headers(self, key=None):
        h = {"Content-Type": "application/json"}
        key = self.api_key if key is None else key
        if key:
            h["Authorization"] = f"Bearer {key}"
        return h

    def request(self, method, path, body=None, key=None, raw=None, timeout=120):
        """(status, parsed JSON or text) of one request."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        if isinstance(data, str):
            data = data.encode()
        conn.request(method, path, body=data, headers=self.headers(key))
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace")
        conn.close()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text

    def metrics(self):
        status, text = self.request("GET", "/metrics")
        assert status == 200
        values = {}
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rpartition(" ")
            values[re.sub(r"\{.*\}", "", name) if "_bucket" not in name else name] = float(value)
        return values

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def openai_client(server):
    import openai
    return openai.OpenAI(base_url=server.base + "/v1", api_key=server.api_key or "none", max_retries=0, timeout=300)


def wait_until(predicate, timeout=30, interval=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
