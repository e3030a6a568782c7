"""The ``judge`` reward: an OpenAI-compatible chat endpoint scores the response with a rubric.

The rubric (``rubric``, a template over ``{prompt}``, ``{response}`` and ``{reference}``, the last
from ``metadata["reference"]`` or ``metadata["answer"]``) goes to ``POST {base_url}/chat/completions``
of ``model``; the key is read from the environment variable ``api_key_env`` (none: no
``Authorization`` header). A job of the control plane may name only a variable its admin lists
(``Settings.job_api_key_envs``), and its URL, the default one included, must be allowed
(``Settings.job_engine_urls``): :mod:`rockroll.api.jobs.outbound` checks :func:`chat_url`. The judge's text must hold a score that ``score_pattern``'s first group
reads; it is divided by ``max_score`` and clipped to ``[0, 1]``.

Every failure here is infra, never a zero: an endpoint that refuses, times out or answers non-2xx
or malformed JSON raises :class:`~rockroll.agentrl.rewards.errors.JudgeEndpointError`; a text
without a score raises :class:`~rockroll.agentrl.rewards.errors.JudgeParseError`. The router
(:mod:`rockroll.agentrl.rewards.router`) records them as infra failures.

Requests are ``async`` (awaited on the event loop, no thread held), at most ``max_concurrency`` in
flight (an ``asyncio.Semaphore``) and at most ``requests_per_s`` started per second (aiolimiter's
leaky bucket). The HTTP client, semaphore and limiter are bound to the running loop, and rebuilt
when a new loop calls (as :mod:`rockroll.agentrl.engines.openai_engine` does).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import Field, field_validator

from rockroll.agentrl.rewards.base import ConfigModel, Reward, RewardResult
from rockroll.agentrl.rewards.errors import JudgeEndpointError, JudgeParseError

if TYPE_CHECKING:
    from aiolimiter import AsyncLimiter

__all__ = ["JudgeReward", "JudgeConfig", "DEFAULT_RUBRIC", "chat_url"]

DEFAULT_RUBRIC = """You grade an answer to a task. Judge its correctness and helpfulness against the reference, if any.

Task:
{prompt}

Reference answer:
{reference}

Answer to grade:
{response}

Reply with one line of reasoning, then a last line of the form "SCORE: <integer from 0 to 10>"."""


def chat_url(base_url: str) -> str:
    """The URL a judge of ``base_url`` POSTs every rubric to (``/v1`` appended when missing)."""
    url = base_url.rstrip("/")
    return (url if url.endswith("/v1") else url + "/v1") + "/chat/completions"


class JudgeConfig(ConfigModel):
    base_url: str = Field("http://127.0.0.1:8000/v1", description="Root of the OpenAI-compatible server.")
    model: str = Field("judge", description="Model id the server serves.")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Environment variable holding the key (unset or '': none); in a job, one its server lists "
        "in job_api_key_envs.",
    )
    rubric: str = Field(DEFAULT_RUBRIC, description="Prompt template over {prompt}, {response}, {reference}.")
    system_prompt: str = Field("", description="System message before the rubric (empty: none).")
    score_pattern: str = Field(
        r"(?i)score\s*[:=]\s*(-?\d+(?:\.\d+)?)", description="Regex whose first group is the score (last match)."
    )
    max_score: float = Field(10.0, gt=0, description="The rubric's top score (the reward is score / max_score).")
    max_tokens: int = Field(256, ge=1, le=32_768, description="Most tokens of the judge's answer.")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature of the judge.")
    timeout_s: float = Field(60.0, gt=0, description="Timeout of one request.")
    max_concurrency: int = Field(8, ge=1, le=4096, description="Most requests in flight at once.")
    requests_per_s: float = Field(10.0, ge=0, description="Most requests started per second (0: no limit).")

    @field_validator("score_pattern")
    @classmethod
    def _one_group(cls, v: str) -> str:
        if re.compile(v).groups < 1:
            raise ValueError("score_pattern needs a group around the number, e.g. 'SCORE: (\\d+)'")
        return v

    @field_validator("rubric")
    @classmethod
    def _placeholders(cls, v: str) -> str:
        if "{response}" not in v:
            raise ValueError("the rubric must contain {response} (and may use {prompt}, {reference})")
        return v


class JudgeReward(Reward):
    """See the module docstring. Details: ``judge_text``, ``raw_score``."""

    Config = JudgeConfig
    config: JudgeConfig

    def __init__(self, config: ConfigModel | None = None) -> None:
        super().__init__(config)
        self.url = chat_url(self.config.base_url)
        self.base_url = self.url.removesuffix("/chat/completions")
        self._pattern = re.compile(self.config.score_pattern)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http_state: tuple[httpx.AsyncClient, asyncio.Semaphore, AsyncLimiter | None] | None = None

    def _http(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore, AsyncLimiter | None]:
        loop = asyncio.get_running_loop()
        if self._http_state is None or self._loop is not loop:  # clients, semaphores, limiters are bound to a loop
            from aiolimiter import AsyncLimiter  # the rlvr extra; only a judge needs it

            cfg = self.config
            key = os.environ.get(cfg.api_key_env, "")
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            limits = httpx.Limits(max_connections=cfg.max_concurrency, max_keepalive_connections=cfg.max_concurrency)
            client = httpx.AsyncClient(headers=headers, timeout=cfg.timeout_s, limits=limits)
            limiter = AsyncLimiter(cfg.requests_per_s, 1.0) if cfg.requests_per_s > 0 else None
            self._http_state, self._loop = (client, asyncio.Semaphore(cfg.max_concurrency), limiter), loop
        return self._http_state

    def messages(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> list[dict[str, str]]:
        """The chat messages sent for one response."""
        reference = metadata.get("reference", metadata.get("answer", "(none)"))
        text = self.config.rubric.format(prompt=prompt, response=response, reference=reference)
        system = [{"role": "system", "content": self.config.system_prompt}] if self.config.system_prompt else []
        return [*system, {"role": "user", "content": text}]

    async def _ask(self, messages: list[dict[str, str]]) -> str:
        client, sem, limiter = self._http()
        cfg, url = self.config, self.url
        body = {"model": cfg.model, "messages": messages, "max_tokens": cfg.max_tokens, "temperature": cfg.temperature}
        async with sem:
            if limiter is not None:
                await limiter.acquire()
            try:
                resp = await client.post(url, json=body)
            except httpx.HTTPError as e:
                raise JudgeEndpointError(url, f"{type(e).__name__}: {e}") from e
        if resp.status_code >= 400:
            raise JudgeEndpointError(url, f"HTTP {resp.status_code}: {resp.text[:300]}", resp.status_code)
        try:
            return str(resp.json()["choices"][0]["message"]["content"] or "")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise JudgeEndpointError(url, f"not a chat completion: {resp.text[:300]!r}", resp.status_code) from e

    async def __call__(self, prompt: str, response: str, metadata: Mapping[str, Any]) -> RewardResult:
        text = await self._ask(self.messages(prompt, response, metadata))
        found = self._pattern.findall(text)
        if not found:
            raise JudgeParseError(text, self.config.score_pattern)
        last = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
        try:
            raw = float(last)
        except ValueError as e:
            raise JudgeParseError(text, self.config.score_pattern) from e
        score = min(max(raw / self.config.max_score, 0.0), 1.0)
        return RewardResult(score, {"judge_text": text[-1000:], "raw_score": raw})

    def close(self) -> None:
        """Close the HTTP client on its loop when that loop is idle and open (else its connections close with it)."""
        state, loop = self._http_state, self._loop
        self._http_state, self._loop = None, None
        if state is not None and loop is not None and not loop.is_closed() and not loop.is_running():
            try:
                loop.run_until_complete(state[0].aclose())
            except Exception:  # noqa: BLE001 - closing: the connections go with the loop anyway
                pass
