"""The vLLM engine's pieces that need no vLLM: frames, weight staging, the python lookup, host death."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from rockroll.agentrl.engines import EngineDeadError, EngineError
from rockroll.agentrl.engines.host_client import HostProcess
from rockroll.agentrl.engines.host_protocol import ProtocolError, read_frame, write_frame
from rockroll.agentrl.engines.vllm_engine import find_vllm_python
from rockroll.agentrl.engines.weight_sync import check_weights_folder, stage_weights, unique_tensors

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

#: a stand-in host: says ready, answers ping, exits with code 3 on "die" (without answering)
FAKE_HOST = """
import os, sys
from rockroll.agentrl.engines.host_protocol import read_frame, write_frame
out = os.fdopen(os.dup(1), "wb")
write_frame(out, {"id": 0, "ok": True, "result": {"ready": True}})
while (frame := read_frame(sys.stdin.buffer)) is not None:
    msg, blob = frame
    if msg["op"] == "die":
        sys.exit(3)
    if msg["op"] == "bad":
        write_frame(out, {"id": msg["id"], "ok": False, "error": "no such thing", "kind": "request"})
        continue
    write_frame(out, {"id": msg["id"], "ok": True, "result": {"pong": True, "blob": len(blob)}})
"""


def test_frames_round_trip_json_and_bytes() -> None:
    buf = io.BytesIO()
    write_frame(buf, {"id": 1, "op": "generate", "prompt_ids": [1, 2, 3]})
    write_frame(buf, {"id": 2, "op": "update_weights"}, b"\x00\x01weights")
    buf.seek(0)
    assert read_frame(buf) == ({"id": 1, "op": "generate", "prompt_ids": [1, 2, 3]}, b"")
    assert read_frame(buf) == ({"id": 2, "op": "update_weights"}, b"\x00\x01weights")
    assert read_frame(buf) is None
    cut = io.BytesIO(buf.getvalue()[:-3])
    assert read_frame(cut) is not None
    with pytest.raises(ProtocolError, match="inside a frame"):
        read_frame(cut)


def _tied_state_dict() -> dict[str, object]:
    emb = torch.randn(10, 4)
    return {"model.embed_tokens.weight": emb, "model.norm.weight": torch.ones(4), "lm_head.weight": emb}


def test_staging_drops_tied_duplicates_and_round_trips(tmp_path: Path) -> None:
    sd = _tied_state_dict()
    assert sorted(unique_tensors(sd)) == ["model.embed_tokens.weight", "model.norm.weight"]
    folder = stage_weights(sd, "folder", tmp_path, version=3)
    assert folder.path == str(tmp_path / "v3") and not folder.blob and folder.tensors == 2
    loaded = safetensors_torch.load_file(str(tmp_path / "v3" / "model.safetensors"))
    assert torch.equal(loaded["model.embed_tokens.weight"], sd["model.embed_tokens.weight"])
    blob = stage_weights(sd, "bytes", tmp_path, version=4)
    assert blob.path is None and set(safetensors_torch.load(blob.blob)) == set(loaded)
    assert blob.message(4) == {"op": "update_weights", "version": 4}
    assert folder.message(3) == {"op": "update_weights", "version": 3, "path": str(tmp_path / "v3")}
    as_is = stage_weights(tmp_path / "v3", "bytes", tmp_path, version=5)  # a folder goes as it is
    assert as_is.path == str((tmp_path / "v3").resolve()) and not as_is.blob


def test_staging_refuses_what_it_cannot_send(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        check_weights_folder(tmp_path / "missing")
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        check_weights_folder(tmp_path)
    with pytest.raises(ValueError, match="'folder' or 'bytes'"):
        stage_weights(_tied_state_dict(), "pickle", tmp_path, version=1)  # type: ignore[arg-type]


def test_vllm_python_lookup(tmp_path: Path) -> None:
    if __import__("importlib").util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this interpreter")
    with pytest.raises(EngineError, match="bash scripts/setup-vllm.sh"):
        find_vllm_python(root=tmp_path)
    venv_python = tmp_path / ".venv-vllm" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("")
    assert find_vllm_python(root=tmp_path) == str(venv_python)
    assert find_vllm_python(sys.executable, root=tmp_path) == sys.executable
    with pytest.raises(EngineError, match="does not exist"):
        find_vllm_python(tmp_path / "nope", root=tmp_path)


def test_a_dead_host_fails_its_requests_with_a_typed_error(tmp_path: Path) -> None:
    host = HostProcess(
        [sys.executable, "-c", FAKE_HOST],
        env=dict(__import__("os").environ),
        log_path=tmp_path / "log",
        name="fake host",
    )
    assert host.start(timeout_s=60) == {"ready": True}
    assert host.call({"op": "ping"}, b"abc").result(timeout=30) == {"pong": True, "blob": 3}
    with pytest.raises(EngineError, match="refused the request: no such thing"):
        host.call({"op": "bad"}).result(timeout=30)
    waiting = host.call({"op": "die"})
    with pytest.raises(EngineDeadError, match="exit code 3"):
        waiting.result(timeout=30)
    assert not host.alive
    with pytest.raises(EngineDeadError):
        host.call({"op": "ping"})
    host.stop()
