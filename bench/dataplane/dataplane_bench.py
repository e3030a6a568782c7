"""Data-plane throughput: sessions stepped directly at a node agent, next to today's proxied control-plane path.

    .venv/bin/python bench/dataplane/dataplane_bench.py --sessions 16,64 --seconds 5
    .venv/bin/python bench/dataplane/dataplane_bench.py --modes embedded-ws --backend docker   # Docker sandboxes

Starts, on 127.0.0.1 only, a control plane without an embedded node (``rockroll serve
--no-embedded-node``) with one standalone ``rockroll node`` registered to it, and a default
``rockroll serve`` (embedded node). Sessions are opened through the control planes; FrozenLake-v0
4x4, random actions, a reset when an episode ends (resets are not counted). Modes:

* ``direct ws``: one WebSocket per session at the standalone agent (``/v1/node/sessions/{id}/ws``),
  steps numbered (``seq``), N sessions concurrently from one asyncio client;
* ``direct batch``: one ``POST /v1/node/step`` steps all N sessions (numbered, token per item);
* ``embedded ws``: the same data-plane socket, served by the default server's embedded agent;
* ``proxied ws``: today's ``/v1/sessions/{id}/ws`` through the default server's control plane.

Each line: steps/s, P50 and P99 step latency (for a batch: the batch's), and CPU ms per step of the
agent, the control plane, the sandboxes and this client (from /proc). A level runs ``--seconds``
and at most ``--max-steps`` steps; every loop is bounded in count and time.

The client shares the machine's cores with the agent and the sandboxes, so its own cost counts. By
default (``--client light``) each socket is :class:`LightSocket`: a real WebSocket client (the
``websockets`` library's sans-I/O protocol: handshake, masked frames, closing handshake) on uvloop,
without the library's asyncio connection layer, and JSON through orjson where installed;
``--client websockets`` uses the library's asyncio client instead.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import secrets
import shutil
import time
from typing import Any

import numpy as np

from rockroll.api.server.serve_proc import NodeProc, ServerProc, create_token, sandbox_pids, scratch_dir
from rockroll.api.server.settings import Settings
from rockroll.client.sdk import ApiClientError, Client
from rockroll.sandbox.node.wire import dumps, loads

ACTIONS = ["<answer>Left</answer>", "<answer>Right</answer>", "<answer>Up</answer>", "<answer>Down</answer>"]
ENV, KWARGS = "FrozenLake-v0", {"size": 4}
Result = tuple[list[float], int, float]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:13]) / tick
    return total


def open_sessions(url: str, token: str, n: int) -> list[dict]:
    with Client(url, token) as c:
        return [c.create_session(ENV, KWARGS) for _ in range(n)]


def close_sessions(url: str, token: str, infos: list[dict]) -> None:
    with Client(url, token) as c:
        for s in infos:
            c.close_session(s["id"])


class LightSocket(asyncio.Protocol):
    """A lean WebSocket client: the ``websockets`` library's sans-I/O ``ClientProtocol`` (the real
    handshake, masking, framing and closing handshake) driven straight from an asyncio protocol,
    without the library's asyncio connection layer. One message in flight: :meth:`ask` sends a text
    message and returns the next text message received."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        from websockets.client import ClientProtocol
        from websockets.uri import parse_uri

        self.proto = ClientProtocol(parse_uri(url), max_size=16 * 1024 * 1024)
        self.headers = headers
        self.loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = self.loop.create_future()
        self.waiter: asyncio.Future[bytes] | None = None
        self.parts: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        request = self.proto.connect()
        for k, v in self.headers.items():
            request.headers[k] = v
        self.proto.send_request(request)
        self._flush()

    def data_received(self, data: bytes) -> None:
        from websockets.frames import Opcode
        from websockets.http11 import Response

        self.proto.receive_data(data)
        for event in self.proto.events_received():
            if isinstance(event, Response):
                exc = self.proto.handshake_exc
                self.opened.set_exception(exc) if exc else self.opened.set_result(None)
            elif event.opcode in (Opcode.TEXT, Opcode.CONT):
                self.parts.append(bytes(event.data))
                if event.fin and self.waiter is not None and not self.waiter.done():
                    message, self.parts = b"".join(self.parts), []
                    self.waiter.set_result(message)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        err = ConnectionError(f"the WebSocket closed: {exc or 'by the server'}")
        for f in (self.opened, self.waiter):
            if f is not None and not f.done():
                f.set_exception(err)

    def _flush(self) -> None:
        for data in self.proto.data_to_send():
            if data and self.transport is not None:
                self.transport.write(data)

    async def ask(self, payload: bytes) -> bytes:
        self.waiter = self.loop.create_future()
        self.proto.send_text(payload)
        self._flush()
        return await self.waiter

    async def close(self) -> None:
        self.proto.send_close()
        self._flush()
        if self.transport is not None:
            self.transport.close()


async def light_connect(url: str, headers: dict[str, str]) -> LightSocket:
    host, port = url.removeprefix("ws://").split("/", 1)[0].rsplit(":", 1)
    _transport, sock = await asyncio.get_running_loop().create_connection(
        lambda: LightSocket(url, headers), host, int(port)
    )
    await sock.opened
    return sock


async def run_ws(
    urls: list[str], headers: list[dict], seconds: float, max_steps: int, numbered: bool, client: str
) -> Result:
    """One socket per URL, stepped concurrently until the deadline or ``max_steps`` steps in all."""
    from websockets.asyncio.client import connect

    lat: list[float] = []
    count = [0]
    t_end = time.perf_counter() + seconds

    async def worker(url: str, header: dict, seed: int) -> None:
        rng = np.random.default_rng(seed)
        seq = 0
        if client == "light":
            ws = await light_connect(url, header)
            ask = ws.ask
        else:
            ws = await connect(url, additional_headers=header, compression=None)

            async def ask(payload: bytes) -> bytes | str:
                await ws.send(payload, text=True)
                return await ws.recv()

        try:
            await ask(dumps({"op": "reset", "seed": seed}))
            while time.perf_counter() < t_end and count[0] < max_steps:
                seq += 1
                msg = {"op": "step", "action": ACTIONS[rng.integers(4)]} | ({"seq": seq} if numbered else {})
                t = time.perf_counter()
                out = loads(await ask(dumps(msg)))
                lat.append(time.perf_counter() - t)
                if "error" in out:
                    raise RuntimeError(f"step failed: {out}")
                count[0] += 1
                if out["terminated"] or out["truncated"]:
                    await ask(dumps({"op": "reset", "seed": count[0]}))
        finally:
            await ws.close()

    t0 = time.perf_counter()
    await asyncio.gather(*[worker(u, h, i) for i, (u, h) in enumerate(zip(urls, headers, strict=True))])
    return lat, count[0], time.perf_counter() - t0


def run_async(coro: Any) -> Any:
    """Run ``coro`` on uvloop where installed (the event loop a lean client would use)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def run_batch(endpoint: str, infos: list[dict], seconds: float, max_steps: int) -> Result:
    """One request steps every session; ended episodes are reset in the next request (stdlib HTTP client)."""
    rng = np.random.default_rng(1)
    tokens = [s["data_plane"]["token"] for s in infos]
    seqs = [0] * len(infos)
    lat: list[float] = []
    steps = 0
    host, port = endpoint.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)

    def post(items: list[dict]) -> list[dict]:
        conn.request("POST", "/v1/node/step", dumps({"steps": items}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = loads(resp.read())
        if resp.status != 200:
            raise RuntimeError(f"batch refused: {body}")
        return body["results"]

    post([{"token": t, "op": "reset", "seed": i} for i, t in enumerate(tokens)])
    ended: set[int] = set()
    t_end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < t_end and steps < max_steps:
        items = []
        for i, t in enumerate(tokens):
            if i in ended:
                items.append({"token": t, "op": "reset", "seed": steps + i})
            else:
                seqs[i] += 1
                items.append({"token": t, "seq": seqs[i], "action": ACTIONS[rng.integers(4)]})
        t = time.perf_counter()
        results = post(items)
        lat.append(time.perf_counter() - t)
        stepped = [i for i in range(len(tokens)) if i not in ended]
        for i in stepped:
            if "error" in results[i]:
                raise RuntimeError(f"batch item failed: {results[i]}")
        steps += len(stepped)
        ended = {i for i in stepped if results[i]["terminated"] or results[i]["truncated"]}
    elapsed = time.perf_counter() - t0
    conn.close()
    return lat, steps, elapsed


def ms(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q)) * 1000 if samples else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", default="16,64", help="Concurrent session counts (comma-separated).")
    p.add_argument("--seconds", type=float, default=5.0, help="Length of each level.")
    p.add_argument("--max-steps", type=int, default=2_000_000, help="Most steps of one level.")
    p.add_argument("--modes", default="direct-ws,direct-batch,embedded-ws,proxied-ws", help="Modes to run.")
    p.add_argument("--per-sandbox", type=int, default=64, help="Most sessions on one sandbox.")
    p.add_argument(
        "--backend", default="process", choices=["process", "docker"],
        help="Sandbox backend of the default server (the embedded-ws and proxied-ws modes); the standalone "
        "agent's sandboxes are process sandboxes.",
    )  # fmt: skip
    p.add_argument(
        "--client", default="light", choices=["light", "websockets"],
        help="WebSocket client: 'light' (websockets' sans-I/O protocol on uvloop, see LightSocket) or "
        "'websockets' (the library's asyncio client).",
    )  # fmt: skip
    args = p.parse_args()
    counts = [int(x) for x in args.sessions.split(",")]
    modes = args.modes.split(",")

    d = scratch_dir("dpbench")
    secret_file = d / "secret"
    secret_file.write_text(secrets.token_urlsafe(32))
    per = ["--max-sessions-per-sandbox", str(args.per_sandbox), "--max-sandboxes", "16"]
    cluster = ServerProc(d / "cp", extra=["--cluster-secret-file", str(secret_file), "--no-embedded-node"] + per)
    default = ServerProc(d / "cp2", backend=args.backend, extra=per)
    for folder in (d / "cp", d / "cp2"):
        folder.mkdir()
    token = create_token(cluster.db_url, "bench")
    token2 = create_token(default.db_url, "bench")
    node = NodeProc(d, secret_file, node_id=f"bench{secrets.token_hex(3)}")
    try:
        cluster.start()
        default.start()
        node.control_plane = cluster.url
        node.start()
        with Client(cluster.url, token) as c:  # wait for the agent's first heartbeat
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not _registered(c, node.node_id):
                time.sleep(0.1)

        def level(mode: str, n: int) -> None:
            url, tok = (default.url, token2) if mode in ("embedded-ws", "proxied-ws") else (cluster.url, token)
            infos = open_sessions(url, tok, n)
            manager = (
                f"node-{node.node_id}"
                if mode.startswith("direct")
                else Settings(database_url=default.db_url).manager_name()
            )
            sb = sandbox_pids(f"rockroll.manager={manager} ")
            agent = [node.proc.pid] if mode.startswith("direct") and node.proc else [default.proc.pid]
            cp = [cluster.proc.pid] if mode.startswith("direct") else []
            c0, a0, s0, b0 = cpu_seconds(cp), cpu_seconds(agent), cpu_seconds(sb), time.process_time()
            try:
                lat, steps, elapsed = _play(mode, infos, tok, default.url, args.seconds, args.max_steps, args.client)
            finally:
                close_sessions(url, tok, infos)
            per_step = lambda v: v / max(1, steps) * 1000  # noqa: E731
            cpu = (per_step(cpu_seconds(agent) - a0), per_step(cpu_seconds(cp) - c0),
                   per_step(cpu_seconds(sb) - s0), per_step(time.process_time() - b0))  # fmt: skip
            where = "agent" if mode.startswith("direct") else "server (control plane + embedded agent)"
            print(
                f"{mode.replace('-', ' ')} {n} sessions: {steps / elapsed:,.0f} steps/s, P50 {ms(lat, 50):.3f} ms, "
                f"P99 {ms(lat, 99):.3f} ms; CPU ms/step {where} {cpu[0]:.3f}, control plane {cpu[1]:.3f}, "
                f"sandboxes {cpu[2]:.3f}, client {cpu[3]:.3f}; load {os.getloadavg()[0]:.1f}"
                + (f"; {args.client} client" if mode.endswith("ws") else ""),
                flush=True,
            )

        for mode in modes:
            for n in counts:
                try:
                    level(mode, n)
                except Exception:
                    print("".join((node.lines if mode.startswith("direct") else default.lines)[-30:]), flush=True)
                    raise
    finally:
        node.cleanup()
        cluster.cleanup()
        default.cleanup()
        shutil.rmtree(d, ignore_errors=True)


def _registered(c: Client, node_id: str) -> bool:
    """Whether a session opens on the agent (its heartbeat arrived)."""
    try:
        info = c.create_session(ENV, KWARGS)
    except ApiClientError:  # 503 no_node until its first heartbeat
        return False
    c.close_session(info["id"])
    return info.get("data_plane", {}).get("node") == node_id


def _play(
    mode: str, infos: list[dict], token: str, default_url: str, seconds: float, max_steps: int, client: str
) -> Result:
    if mode == "direct-batch":
        return run_batch(infos[0]["data_plane"]["endpoint"], infos, seconds, max_steps)
    if mode == "proxied-ws":
        base = "ws" + default_url.removeprefix("http")
        urls = [f"{base}/v1/sessions/{s['id']}/ws" for s in infos]
        headers = [{"Authorization": f"Bearer {token}"}] * len(infos)
        return run_async(run_ws(urls, headers, seconds, max_steps, False, client))
    if mode in ("direct-ws", "embedded-ws"):
        urls = [_ws(s) for s in infos]
        headers = [{"Authorization": f"Bearer {s['data_plane']['token']}"} for s in infos]
        return run_async(run_ws(urls, headers, seconds, max_steps, True, client))
    raise SystemExit(f"unknown mode {mode!r}: direct-ws, direct-batch, embedded-ws or proxied-ws")


def _ws(info: dict) -> str:
    endpoint = info["data_plane"]["endpoint"]
    return "ws" + endpoint.removeprefix("http") + f"/v1/node/sessions/{info['id']}/ws"


if __name__ == "__main__":
    main()
