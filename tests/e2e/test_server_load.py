"""Load: 64 concurrent streaming clients x 4 requests each against `qserve
serve` (CPU, default model, small max_tokens). Every request completes,
p50 / p99 latencies are reported, and the KV cache pages all come back."""
import concurrent.futures
import statistics
import time

from server_harness import Server, openai_client, wait_until

CLIENTS = 64
REQUESTS_PER_CLIENT = 4
MAX_TOKENS = 6


def test_64_streaming_clients():
    server = Server("--max-model-len", "256", "--max-num-seqs", "64")
    try:
        client = openai_client(server)
        model = client.models.list().data[0].id
        m0 = server.metrics()
        free0, total = m0["qserve_kv_cache_pages_free"], m0["qserve_kv_cache_pages_total"]
        assert free0 == total

        def one_client(c):
            latencies, ttfts = [], []
            for i in range(REQUESTS_PER_CLIENT):
                start = time.perf_counter()
                first = None
                stream = client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": f"Client {c}, request {i}: name a colour."}],
                    max_tokens=MAX_TOKENS, temperature=0.8, seed=c * 100 + i, stream=True)
                finish = None
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content and first is None:
                        first = time.perf_counter()
                    if chunk.choices and chunk.choices[0].finish_reason:
                        finish = chunk.choices[0].finish_reason
                assert finish in ("stop", "length"), finish
                latencies.append(time.perf_counter() - start)
                ttfts.append((first or time.perf_counter()) - start)
            return latencies, ttfts

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            results = list(pool.map(one_client, range(CLIENTS)))
        wall = time.perf_counter() - t0
        latencies = sorted(x for lat, _ in results for x in lat)
        ttfts = sorted(x for _, t in results for x in t)
        assert len(latencies) == CLIENTS * REQUESTS_PER_CLIENT

        def pct(xs, p):
            return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

        print(f"\nload: {len(latencies)} streaming requests from {CLIENTS} clients in {wall:.1f} s; "
              f"latency p50 {pct(latencies, 50):.2f} s p99 {pct(latencies, 99):.2f} s "
              f"(mean {statistics.mean(latencies):.2f} s); TTFT p50 {pct(ttfts, 50):.2f} s p99 {pct(ttfts, 99):.2f} s")
        assert wait_until(lambda: server.metrics()["qserve_kv_cache_pages_free"] == free0, timeout=30)
        m = server.metrics()
        assert m["qserve_num_requests_running"] == 0 and m["qserve_num_requests_waiting"] == 0
        assert m["qserve_e2e_request_latency_seconds_count"] >= CLIENTS * REQUESTS_PER_CLIENT
    finally:
        assert server.stop() == 0
