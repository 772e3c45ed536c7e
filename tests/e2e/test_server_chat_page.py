"""The chat page at GET / in headless Chromium (Debian's `chromium`): the page
is opened with ?prompt=...&autosend=1, sends the message through
/v1/chat/completions with streaming, and the dumped DOM must hold a finished,
non-empty assistant reply."""
import html
import re
import shutil
import subprocess
import tempfile
import urllib.parse

import pytest

from server_harness import Server


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("skipped: chromium not installed (scripts/install_deps.sh installs Debian's chromium)")


def test_chat_page_shows_a_streamed_reply():
    browser = chromium()
    server = Server("--max-model-len", "256", api_key=None)
    try:
        query = urllib.parse.urlencode({"prompt": "Say hi.", "autosend": "1", "max_tokens": "8"})
        with tempfile.TemporaryDirectory() as profile:
            out = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--user-data-dir={profile}", "--virtual-time-budget=60000", "--dump-dom",
                 f"{server.base}/?{query}"],
                capture_output=True, text=True, timeout=180)
        dom = out.stdout
        assert "<html" in dom, out.stderr[-2000:]
        replies = re.findall(r'<div class="msg assistant" data-state="done">(.*?)</div>', dom, re.S)
        assert replies, dom[-3000:]
        assert html.unescape(replies[-1]).strip()
        assert 'class="msg user"' in dom and "Say hi." in dom
    finally:
        server.stop()
