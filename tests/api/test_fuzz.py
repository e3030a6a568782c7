"""Schemathesis over ``/openapi.json`` of a real server: no input may cause a 5xx.

Every operation gets ``FUZZ_EXAMPLES`` valid and as many invalid generated cases (``ROCKROLL_FUZZ_EXAMPLES``, default 25,
over 500 cases in all); every answer must be below 500 and every error answer must have the
``{"error": {"code", "message", "details"}}`` shape.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from rockroll.api.server.serve_proc import ServerProc, create_token, scratch_dir

pytestmark = pytest.mark.slow
FUZZ_EXAMPLES = int(os.environ.get("ROCKROLL_FUZZ_EXAMPLES", "15"))


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[tuple[ServerProc, str]]:
    d = scratch_dir("fuzz")
    # no train jobs: a generated ``{"kind": "train", "config": {}}`` would start a real training run
    srv = ServerProc(d, extra=["--max-sandboxes", "3", "--no-train-jobs"])
    token = create_token(srv.db_url, "fuzzer")
    srv.start()
    yield srv, token
    srv.cleanup()


def test_openapi_fuzz_finds_no_server_error(fuzz_server: tuple[ServerProc, str]) -> None:
    import schemathesis
    from schemathesis import GenerationMode

    srv, token = fuzz_server
    schema = schemathesis.openapi.from_url(f"{srv.url}/openapi.json")
    headers = {"Authorization": f"Bearer {token}"}
    total = 0
    problems: list[str] = []
    statuses: dict[int, int] = {}
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 20

    for operation, mode in [(op, m) for op in operations for m in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]:

        @settings(
            max_examples=FUZZ_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case) -> None:  # noqa: ANN001 - a schemathesis Case
            nonlocal total
            total += 1
            resp = case.call(headers=headers, timeout=120)
            label = f"{case.method} {case.formatted_path} -> {resp.status_code}"
            statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1
            if resp.status_code >= 500:
                problems.append(f"{label}: {resp.text[:300]}")
            elif resp.status_code >= 400:
                try:
                    err = resp.json()["error"]
                    assert {"code", "message", "details"} <= set(err)
                except (ValueError, KeyError, TypeError, AssertionError):
                    problems.append(f"{label}: error body has the wrong shape: {resp.text[:200]}")

        try:
            run()
        except Unsatisfiable:  # no invalid input exists for an operation without parameters
            assert mode is GenerationMode.NEGATIVE
    print(f"{total} cases over {len(operations)} operations; answers by status: {sorted(statuses.items())}")
    assert total >= 500, f"only {total} cases ran"
    assert not problems, f"{len(problems)} bad answers out of {total}:\n" + "\n".join(problems[:20])
