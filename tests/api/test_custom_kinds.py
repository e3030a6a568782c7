"""Custom env kinds beyond a single module: a pure-Python wheel, and an entry point in the image."""

from __future__ import annotations

import base64
import io
import zipfile

from fastapi.testclient import TestClient

WHEEL_MODULE = b'''
from rockroll.envs.frozenlake import FrozenLakeEnv


class WheelLake(FrozenLakeEnv):
    """FrozenLake shipped in a wheel."""
'''


def _wheel() -> bytes:
    """A minimal pure-Python wheel with package ``wheel_lake``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("wheel_lake/__init__.py", WHEEL_MODULE)
        z.writestr("wheel_lake-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: wheel-lake\nVersion: 0.1\n")
        z.writestr("wheel_lake-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("wheel_lake-0.1.dist-info/RECORD", "")
    return buf.getvalue()


def test_wheel_upload_is_validated_and_playable(dev_client: TestClient) -> None:
    body = {
        "id": "WheelLake-v0",
        "kind": "source",
        "entry_point": "wheel_lake:WheelLake",
        "source_name": "wheel_lake-0.1-py3-none-any.whl",
        "source_b64": base64.b64encode(_wheel()).decode(),
        "kwargs": {"is_slippery": False},
        "tags": ["wheel"],
    }
    r = dev_client.post("/v1/envs", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["source_bytes"] > 0 and r.json()["kind"] == "source"
    assert r.json()["id"] == "dev/WheelLake-v0"  # the dev principal's namespace
    s = dev_client.post("/v1/sessions", json={"env": "dev/WheelLake-v0"}).json()
    assert s["env"] == "dev/WheelLake-v0" and s["system_prompt"]
    first = dev_client.post(f"/v1/sessions/{s['id']}/reset", json={"seed": 0}).json()
    assert isinstance(first["observation"], str)
    assert dev_client.post(f"/v1/sessions/{s['id']}/step", json={"action": "<answer>Up</answer>"}).status_code == 200
    dev_client.delete(f"/v1/sessions/{s['id']}")
    assert [e["id"] for e in dev_client.get("/v1/envs", params={"tag": "wheel"}).json()["envs"]] == ["dev/WheelLake-v0"]
    assert dev_client.delete("/v1/envs/dev/WheelLake-v0").status_code == 204
    assert dev_client.get("/v1/envs/dev/WheelLake-v0").status_code == 404


def test_entry_point_already_in_the_image(dev_client: TestClient) -> None:
    r = dev_client.post(
        "/v1/envs",
        json={"id": "TinyLake-v3", "kind": "entry_point", "entry_point": "rockroll.envs.frozenlake:FrozenLakeEnv",
              "kwargs": {"is_slippery": False}, "max_steps": 5},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    s = dev_client.post("/v1/sessions", json={"env": "dev/TinyLake-v3"}).json()
    dev_client.post(f"/v1/sessions/{s['id']}/reset", json={"seed": 1})
    outs = [dev_client.post(f"/v1/sessions/{s['id']}/step", json={"action": "nothing"}).json() for _ in range(5)]
    assert outs[-1]["truncated"] is True  # the spec's max_steps=5 applies inside the sandbox


def test_entry_point_missing_from_the_image_is_rejected(dev_client: TestClient) -> None:
    r = dev_client.post("/v1/envs", json={"id": "Ghost-v0", "kind": "entry_point", "entry_point": "no_such:Env"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "env_validation_failed" and "no_such" in err["message"]
