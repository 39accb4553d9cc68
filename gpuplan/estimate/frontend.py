"""The server's front end a request crosses: an OpenAI-compatible server parses the HTTP request, renders the chat
template, tokenizes the prompt and streams tokens back; a benchmark client's TTFT includes all of it, an in-process
benchmark (``endpoint: offline``: trtllm-bench, LMDeploy's profile_generation, LLM.generate with token ids) none.
That work is done by one process for every request (vLLM's API server: "the API server runs in a single process,
utilizing a single CPU", RFC #12705, ``--api-server-count`` 1 by default; SGLang's TokenizerManager; trtllm-serve),
which caps the requests a replica serves (``frontend_capacity``) and sets a burst's requests apart
(``serving_load.burst_speed``)."""

from __future__ import annotations

import math

# HTTP parsing, request objects, the chat template and streaming the first chunk back: a client's TTFT less
# the engine's own TTFT metric (vllm:time_to_first_token_seconds), vLLM PR #54628, Qwen2.5-0.5B, 512 in /
# 128 out, two rounds each: /v1/completions 8.4 and 12.0 ms, /v1/chat/completions 12.2 and 11.0 ms.
HTTP_SECONDS = {"completions": (0.0084 + 0.0120) / 2, "chat": (0.0122 + 0.0110) / 2, "offline": 0.0}
# The prompt's tokenization in the server process: vLLM PR #10635, "when dealing with long sequence lengths
# (256K), tokenization can take a few hundred milliseconds" (HF fast tokenizer): about 1 microsecond a token.
TOKENIZE_SECONDS_PER_TOKEN = 1.0e-6
# Streaming a generated token back: the server process's own time per token (incremental detokenization, the
# response chunk, the SSE write). vLLM PR #12287 measured its V1 front end as the bottleneck (Llama-3.2-1B-Instruct
# on an A100, 400 clients, ShareGPT with --ignore-eos, /v1/completions): with the PR (and #12298), 70.84 requests/s
# of 202 output tokens (1,211,959 over 6,000 requests), i.e. 14.12 ms of that process per request; less the front
# end of a 225-token completion (1,350,511 prompt tokens over 6,000), 3.69 ms over 202 tokens. The front end's
# figure is a latency (HTTP_SECONDS), at least the process's own time, so this share is if anything low. (Little's
# law then gives its clients a TPOT of (400 / 70.84 s - TTFT 0.20 s) / 201 = 27.1 ms; the PR measured 26.76 ms.)
STREAM_SECONDS_PER_TOKEN = (1 / 70.84 - (HTTP_SECONDS["completions"] + 225 * TOKENIZE_SECONDS_PER_TOKEN)) / 202


def frontend_seconds(endpoint: str, prompt_tokens: float) -> float:
    """Time a request spends in the server's front end before and after its first token's pass."""
    if endpoint == "offline":
        return 0.0
    return HTTP_SECONDS[endpoint] + TOKENIZE_SECONDS_PER_TOKEN * prompt_tokens


def request_overhead(engine_overhead_s: float, endpoint: str, prompt_tokens: float) -> float:
    """A request's own time before its first prefill step: the engine's per-request overhead and the front
    end's; a burst's requests reach the scheduler this far apart (``burst_speed``)."""
    return engine_overhead_s + frontend_seconds(endpoint, prompt_tokens)


def frontend_capacity(endpoint: str, prompt_tokens: float, output_tokens: float) -> float:
    """Requests per second one server process takes in and streams back (its front end for each request and
    the stream of each generated token): the most a replica serves, whatever its GPUs; none offline."""
    if endpoint == "offline":
        return math.inf
    return 1 / (frontend_seconds(endpoint, prompt_tokens) + output_tokens * STREAM_SECONDS_PER_TOKEN)
