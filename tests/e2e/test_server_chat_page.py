"""The chat page at GET / driven in headless Chromium (Debian's `chromium`)
over the DevTools protocol (--remote-debugging-pipe, standard library only):
the page is opened with ?prompt=...&autosend=1, sends the message through
/v1/chat/completions with streaming, and an assistant reply must appear and
finish."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse

import pytest

from server_harness import Server


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("skipped: chromium not installed (scripts/install_deps.sh installs Debian's chromium)")


class DevTools:
    """Chromium with --remote-debugging-pipe: commands on fd 3, replies on fd 4, NUL-separated JSON."""

    def __init__(self, browser, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def wire():  # in the child: its fd 3 reads our commands, its fd 4 writes replies
            os.dup2(to_chrome_r, 100)
            os.dup2(from_chrome_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.proc = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0

    def call(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        raise TimeoutError(method)

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.to_chrome)
        os.close(self.from_chrome)


READ_REPLY = """(() => {
  const r = document.querySelector('.msg.assistant');
  return JSON.stringify(r ? {state: r.dataset.state, text: r.textContent} : {state: 'none', text: ''});
})()"""


def test_chat_page_shows_a_streamed_reply():
    browser = chromium()
    server = Server("--max-model-len", "256", api_key=None)
    try:
        query = urllib.parse.urlencode({"prompt": "Say hi.", "autosend": "1", "max_tokens": "8"})
        with tempfile.TemporaryDirectory() as profile:
            tools = DevTools(browser, profile)
            try:
                target = tools.call("Target.createTarget", {"url": f"{server.base}/?{query}"})["targetId"]
                session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
                reply, seen_streaming = {"state": "none"}, False
                deadline = time.time() + 120
                while time.time() < deadline:
                    out = tools.call("Runtime.evaluate", {"expression": READ_REPLY, "returnByValue": True},
                                     session=session)
                    reply = json.loads(out["result"]["value"])
                    seen_streaming |= reply["state"] == "streaming"
                    if reply["state"] in ("done", "error"):
                        break
                    time.sleep(0.05)
                user = tools.call("Runtime.evaluate", {"expression": "document.querySelector('.msg.user').textContent",
                                                       "returnByValue": True}, session=session)["result"]["value"]
            finally:
                tools.close()
        assert user == "Say hi."
        assert reply["state"] == "done", reply
        assert reply["text"].strip(), reply
        assert seen_streaming  # the reply was shown while it streamed in
        m = server.metrics()
        assert any(k.startswith("qserve_http_requests_total") for k in m)
    finally:
        server.stop()
