"""Hugging Face export: a trained (perturbed) tiny policy, exported from memory and from a run's checkpoints,
reloads through the loaders ``rockroll eval`` and ``serve-model`` use and decodes the same greedy tokens."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rockroll.agentrl.engines import GenerationRequest, SamplingParams  # noqa: E402
from rockroll.agentrl.engines.hf import HFEngine  # noqa: E402
from rockroll.agentrl.models.tiny import TINY_MARKER, load_model_and_tokenizer  # noqa: E402
from rockroll.trainer.config_io import load_config, save_config  # noqa: E402
from rockroll.trainer.learner.workers import LocalWorkers  # noqa: E402
from rockroll.trainer.run import checkpoint as ckpt  # noqa: E402
from rockroll.trainer.run.export import EXPORT_MARKER, ExportError, export_model, export_run, export_weights  # noqa: E402
from tests.agentrl.model_server import model_server  # noqa: E402

MAX_NEW = 10


def _prompts(tok: Any, n: int = 4) -> list[list[int]]:
    """Chat prompts of different lengths built from FrozenLake observations."""
    import rockroll.envhub as envhub

    env = envhub.make("FrozenLake-v0", size=4)
    out = []
    for i in range(n):
        obs, _ = env.reset(seed=100 + i)
        msgs = [{"role": "system", "content": "Reach the goal."}, {"role": "user", "content": obs + " ?" * i}]
        text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        out.append(tok.encode(text, add_special_tokens=False))
    return out


def _greedy(engine: HFEngine, prompts: list[list[int]]) -> list[list[int]]:
    async def go() -> list[list[int]]:
        try:
            reqs = [GenerationRequest(p, SamplingParams(max_new_tokens=MAX_NEW, temperature=0.0)) for p in prompts]
            return [r.token_ids for r in await asyncio.gather(*(engine.generate(r) for r in reqs))]
        finally:
            await engine.close()

    return asyncio.run(go())


def _in_memory_greedy(model: Any, tok: Any, prompts: list[list[int]]) -> list[list[int]]:
    return _greedy(HFEngine(model=model, tokenizer=tok), prompts)


@pytest.fixture(scope="module")
def trained(tiny_model_dir: Path) -> tuple[Any, Any, list[list[int]]]:
    """The tiny policy with seeded noise on every weight, so it differs from its initialisation (whose
    greedy output is one token repeated) and each prompt gets its own greedy answer."""
    model, tok = load_model_and_tokenizer(tiny_model_dir)
    prompts = _prompts(tok)
    before = _in_memory_greedy(model, tok, prompts)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    after = _in_memory_greedy(model, tok, prompts)
    init = load_model_and_tokenizer(tiny_model_dir)[0].state_dict()
    assert all(not torch.equal(v, init[k]) for k, v in model.state_dict().items())
    assert after != before and len({tuple(a) for a in after}) > 1, "outputs should depend on weights and prompt"
    return model, tok, prompts


def _assert_same_policy(export: Path, model: Any, tok: Any, prompts: list[list[int]]) -> None:
    expected = _in_memory_greedy(model, tok, prompts)
    loaded, loaded_tok = load_model_and_tokenizer(export)  # what `rockroll eval` (hf engine) uses
    assert type(loaded_tok) is type(tok)
    assert _prompts(loaded_tok) == prompts  # the exported tokenizer and chat template encode the same
    state = loaded.state_dict()
    for k, v in model.state_dict().items():
        assert torch.equal(state[k], v), k
    assert _in_memory_greedy(loaded, loaded_tok, prompts) == expected
    assert _greedy(HFEngine(export), prompts) == expected  # the hf engine from model_path


def test_export_model_writes_a_loadable_hf_directory(trained, tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok, prompts = trained
    out = export_model(model, tok, tmp_path / "export", source_dir=tiny_model_dir)
    assert out == tmp_path / "export"
    files = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", TINY_MARKER} <= files
    assert "generation_config.json" in files and not any(name.endswith(".bin") for name in files)
    template = (out / "chat_template.jinja").read_text() if "chat_template.jinja" in files else None
    template = template or json.loads((out / "tokenizer_config.json").read_text())["chat_template"]
    assert template == tok.chat_template
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen["eos_token_id"] == tok.eos_token_id and gen["pad_token_id"] == tok.pad_token_id
    assert not list(tmp_path.glob(".export.*")), "no temporary directory is left behind"
    _assert_same_policy(out, model, tok, prompts)


def test_export_model_defaults_source_and_merges_generation_config(trained, tmp_path: Path) -> None:
    model, tok, _ = trained
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "stale.bin").write_text("old")  # an existing export is replaced whole
    out = export_model(model, tok, tmp_path / "export", generation_config={"temperature": 0.7, "do_sample": True})
    assert (out / TINY_MARKER).is_file()  # found through the directory the model was loaded from
    assert not (out / "stale.bin").exists()
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen["temperature"] == 0.7 and gen["do_sample"] is True and gen["eos_token_id"] == tok.eos_token_id


def test_export_weights_keeps_their_dtype(trained, tiny_model_dir: Path, tmp_path: Path) -> None:
    model, _, _ = trained
    weights = {f"module.{k}": v.to(torch.bfloat16) for k, v in model.state_dict().items()}  # as DDP names them
    out = export_weights(weights, tiny_model_dir, tmp_path / "bf16", metadata={"step": 3})
    loaded, _ = load_model_and_tokenizer(out, dtype="bfloat16")
    assert all(torch.equal(loaded.state_dict()[k.removeprefix("module.")], v) for k, v in weights.items())
    config = json.loads((out / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "bfloat16"  # transformers 5 / 4
    assert json.loads((out / EXPORT_MARKER).read_text()) == {"step": 3}
    with pytest.raises(ExportError, match="do not fit the base model"):
        export_weights({"lm_head.weight": torch.zeros(3, 3)}, tiny_model_dir, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def _make_run(root: Path, model_dir: Path, model: Any, steps: list[int]) -> Path:
    """A run directory laid out as the pipeline leaves it: config.yaml and checkpoints of workers.state_dict()."""
    cfg = load_config(
        None, ["name=exp", f"logging.run_dir={root}", f"model.path={model_dir}", "model.build_tiny=false"]
    )
    run = root / "exp"
    run.mkdir(parents=True)
    save_config(cfg, run / "config.yaml")
    workers = LocalWorkers(model, cfg)
    for i, step in enumerate(steps):
        ckpt.save_checkpoint(run, step, {"workers": workers.state_dict(), "version": i + 1}, keep=len(steps))
    return run


def test_export_run_from_checkpoints(trained, tiny_model_dir: Path, tmp_path: Path) -> None:
    model, tok, prompts = trained
    run = _make_run(tmp_path / "runs", tiny_model_dir, model, [3, 7])
    final = export_run(run)
    assert final == run / "export" / "final"
    meta = json.loads((final / EXPORT_MARKER).read_text())
    assert meta["step"] == 7 and meta["weight_version"] == 2 and meta["export"] == "final"
    assert meta["tool_call_parser"] == "hermes"  # the run's rollout.episode.tool_call_parser (serve-model's default)
    _assert_same_policy(final, model, tok, prompts)
    step3 = export_run(run, 3)
    assert step3 == run / "export" / "step-3" and json.loads((step3 / EXPORT_MARKER).read_text())["step"] == 3
    other = export_run(run, "final", tmp_path / "elsewhere")
    assert other == tmp_path / "elsewhere" and (other / "model.safetensors").is_file()
    with pytest.raises(ExportError, match="no checkpoint of step 5; kept steps: 3, 7"):
        export_run(run, 5)
    with pytest.raises(ExportError, match="no warm-start weights"):
        export_run(run, "warmstart")
    export_model(model, tok, run / "export" / "warmstart", source_dir=tiny_model_dir)  # as the pipeline does
    copied = export_run(run, "warmstart", tmp_path / "ws")
    assert (copied / "model.safetensors").read_bytes() == (
        run / "export" / "warmstart" / "model.safetensors"
    ).read_bytes()


def test_export_records_the_runs_tool_call_parser(tmp_path: Path) -> None:
    from rockroll.agentrl.serving.tool_calls import recorded_parser
    from rockroll.trainer.run.export import _tool_call_parser

    cfg = load_config(None, ["name=exp", "rollout.episode.tool_call_parser=mistral"])
    save_config(cfg, tmp_path / "config.yaml")
    assert _tool_call_parser(tmp_path) == "mistral"
    assert _tool_call_parser(tmp_path / "no-config") == "hermes"
    (tmp_path / EXPORT_MARKER).write_text(json.dumps({"tool_call_parser": _tool_call_parser(tmp_path)}))
    assert recorded_parser(tmp_path) == "mistral"  # what serve-model serves the export with


def test_export_cli(trained, tiny_model_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rockroll.cli.main import app

    model, _, _ = trained
    run = _make_run(tmp_path / "runs", tiny_model_dir, model, [4])
    result = CliRunner().invoke(app, ["export", str(run), "--step", "4"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(run / "export" / "step-4")
    assert (run / "export" / "step-4" / "model.safetensors").is_file()
    for args, message in [
        ([str(tmp_path / "nope")], "no run directory"),
        ([str(run), "--step", "9"], "no checkpoint of step 9"),
        ([str(run), "--step", "best"], "step must be a checkpoint step"),
    ]:
        result = CliRunner().invoke(app, ["export", *args])
        assert result.exit_code == 2, result.output
        assert message in result.stderr and "Traceback" not in result.output
        errors = [line for line in result.stderr.strip().splitlines() if not line.endswith(" ...")]  # less progress
        assert len(errors) == 1 and errors[0].startswith("error: ")


@pytest.mark.slow
def test_serve_model_loads_the_export(trained, tiny_model_dir: Path, tmp_path: Path) -> None:
    import httpx

    model, tok, prompts = trained
    out = export_model(model, tok, tmp_path / "served", source_dir=tiny_model_dir)
    expected = _in_memory_greedy(model, tok, prompts)
    with model_server(out, "x") as url:
        for ids, want in zip(prompts, expected, strict=True):
            body = {"prompt": ids, "max_tokens": MAX_NEW, "temperature": 0, "return_token_ids": True}
            got = httpx.post(url + "/v1/completions", json=body, timeout=60).json()
            assert got["choices"][0]["token_ids"] == want
