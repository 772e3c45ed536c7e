"""`qserve serve` with the default model through the official openai client:
completions, chat, streaming, stop sequences, seeds, logprobs, and every bad
input with its status while the server keeps serving. CPU, small max_tokens."""
import http.client
import json
import signal
import threading
import time

import pytest

from server_harness import API_KEY, Server, openai_client, wait_until

MAX_MODEL_LEN = 512


@pytest.fixture(scope="module")
def server():
    s = Server("--max-model-len", str(MAX_MODEL_LEN), "--max-body-bytes", "65536", "--served-model-name", "smol")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server)


def test_health_models_and_page(server):
    assert server.request("GET", "/health") == (200, {"status": "ok"})
    status, models = server.request("GET", "/v1/models")
    assert status == 200 and models["data"][0]["id"] == "smol"
    assert models["data"][0]["max_model_len"] == MAX_MODEL_LEN
    status, page = server.request("GET", "/")
    assert status == 200 and "<html" in page and "/v1/chat/completions" in page


def test_completion(client):
    r = client.completions.create(model="smol", prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and len(r.choices) == 1
    assert r.choices[0].text and r.choices[0].finish_reason in ("length", "stop")
    assert r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    again = client.completions.create(model="smol", prompt="The capital of France is", max_tokens=8, temperature=0)
    assert again.choices[0].text == r.choices[0].text  # greedy is deterministic


def test_completion_streaming_matches_non_streaming(client):
    kwargs = dict(model="smol", prompt="Once upon a time", max_tokens=10, temperature=0)
    full = client.completions.create(**kwargs).choices[0].text
    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == full
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_chat(client):
    messages = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Say hello."}]
    r = client.chat.completions.create(model="smol", messages=messages, max_tokens=12, temperature=0)
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content
    stream = client.chat.completions.create(model="smol", messages=messages, max_tokens=12, temperature=0, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == r.choices[0].message.content
    # max_completion_tokens is the newer name of max_tokens.
    r2 = client.chat.completions.create(model="smol", messages=messages, max_completion_tokens=3, temperature=0)
    assert r2.usage.completion_tokens <= 3


def test_stop_sequence(client):
    base = client.completions.create(model="smol", prompt="1, 2, 3, 4,", max_tokens=16, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text
    assert len(base) > 4
    stop = base[len(base) // 2:len(base) // 2 + 2]
    cut = base.index(stop)
    r = client.completions.create(model="smol", prompt="1, 2, 3, 4,", max_tokens=16, temperature=0, stop=[stop],
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].text == base[:cut]
    assert r.choices[0].finish_reason == "stop"


def test_seeds(client):
    kwargs = dict(model="smol", prompt="My favourite colour is", max_tokens=12, temperature=1.0)
    a = client.completions.create(seed=1234, **kwargs).choices[0].text
    b = client.completions.create(seed=1234, **kwargs).choices[0].text
    assert a == b
    others = {client.completions.create(seed=s, **kwargs).choices[0].text for s in (1, 2, 3)}
    assert len(others | {a}) > 1  # different seeds explore different samples
    r = client.completions.create(seed=7, n=3, **kwargs)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]


def test_logprobs(client):
    r = client.completions.create(model="smol", prompt="Hello", max_tokens=4, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == r.usage.completion_tokens
    assert all(x <= 0.0 for x in lp.token_logprobs)
    assert all(len(t) <= 2 for t in lp.top_logprobs)
    c = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Hi"}], max_tokens=3,
                                       temperature=0, logprobs=True, top_logprobs=2)
    assert len(c.choices[0].logprobs.content) == c.usage.completion_tokens


@pytest.mark.parametrize("path,body,status", [
    ("/v1/completions", "{not json", 400),
    ("/v1/completions", {"model": "smol", "prompt": "x", "max_tokens": "8"}, 400),
    ("/v1/completions", {"model": "smol", "prompt": 5}, 400),
    ("/v1/completions", {"model": "smol", "prompt": "x", "temperature": 5}, 400),
    ("/v1/completions", {"model": "smol", "prompt": "x", "top_p": 0}, 400),
    ("/v1/completions", {"model": "smol", "prompt": "x", "n": 0}, 400),
    ("/v1/completions", {"model": "smol", "prompt": "x", "max_tokens": -1}, 400),
    ("/v1/completions", {"model": "smol", "prompt": "x", "max_tokens": 100000}, 400),
    ("/v1/completions", {"model": "smol", "prompt": "word " * 600, "max_tokens": 4}, 400),
    ("/v1/chat/completions", {"model": "smol", "messages": []}, 400),
    ("/v1/chat/completions", {"model": "smol", "messages": [{"role": "user"}]}, 400),
    ("/v1/chat/completions", {"model": "smol", "messages": "hello"}, 400),
    ("/v1/completions", {"model": "no-such-model", "prompt": "x"}, 404),
    ("/v1/chat/completions", {"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}, 404),
    ("/v1/no-such-endpoint", {}, 404),
    ("/v1/completions", {"model": "smol", "prompt": "x" * 100000}, 413),
])
def test_bad_input_gets_its_status_and_the_server_keeps_serving(server, path, body, status):
    raw = body if isinstance(body, str) else None
    got, payload = server.request("POST", path, body=None if raw else body, raw=raw)
    assert got == status, payload
    assert isinstance(payload, dict) and "message" in payload["error"] and "type" in payload["error"]
    ok, r = server.request("POST", "/v1/completions", {"model": "smol", "prompt": "Hi", "max_tokens": 2})
    assert ok == 200, r


def test_api_key(server):
    assert server.request("GET", "/v1/models", key="")[0] == 401
    assert server.request("GET", "/v1/models", key="wrong-key-123")[0] == 401
    assert server.request("GET", "/v1/models", key=API_KEY)[0] == 200
    assert server.request("GET", "/health", key="")[0] == 200  # liveness stays open


def _running_and_free(server):
    m = server.metrics()
    return m["qserve_num_requests_running"], m["qserve_kv_cache_pages_free"], m["qserve_kv_cache_pages_total"]


def test_client_disconnect_cancels_and_frees_pages(server):
    _, free0, total = _running_and_free(server)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    body = {"model": "smol", "prompt": "Tell me a long story.", "max_tokens": 400, "stream": True, "ignore_eos": True}
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers=server.headers())
    resp = conn.getresponse()
    assert resp.status == 200
    got = b""
    while got.count(b"data: ") < 3:
        got += resp.read1(4096)
    assert wait_until(lambda: _running_and_free(server)[0] >= 1, timeout=10)
    conn.sock.close()  # hang up mid-stream
    conn.close()
    assert wait_until(lambda: _running_and_free(server)[:2] == (0, free0), timeout=30), server.metrics()
    finished = server.metrics()
    assert finished.get("qserve_num_requests_waiting", 0) == 0 and total > 0


def test_queue_full_gets_429():
    s = Server("--max-num-seqs", "1", "--max-waiting-requests", "1", "--max-model-len", "256")
    try:
        results = []

        def one():
            results.append(s.request("POST", "/v1/completions",
                                     {"prompt": "Count: 1, 2,", "max_tokens": 24, "ignore_eos": True})[0])

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 429 in results and 200 in results, results
        assert set(results) <= {200, 429}
        assert s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})[0] == 200
    finally:
        s.stop()


def test_sigterm_drains_in_flight_requests():
    s = Server("--max-model-len", "256")
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    body = {"prompt": "Once upon a time", "max_tokens": 24, "stream": True, "ignore_eos": True}
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers=s.headers())
    resp = conn.getresponse()
    first = resp.read1(4096)
    assert b"data: " in first
    s.proc.send_signal(signal.SIGTERM)
    rest = first + resp.read()  # the in-flight stream runs to its end
    assert rest.rstrip().endswith(b"data: [DONE]")
    assert b'"finish_reason":"length"' in rest
    assert s.proc.wait(timeout=60) == 0
    assert any("draining" in line for line in s.stderr_lines)
