"""Latency distributions for stand-in engines and slow test envs (benchmarks, fault injection)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Latency", "LatencyKind"]

LatencyKind = Literal["none", "constant", "exponential", "lognormal"]


@dataclass(frozen=True)
class Latency:
    """A delay in seconds drawn per call.

    Attributes:
        kind: ``none`` (0), ``constant`` (always ``median_s``), ``exponential`` (mean ``median_s``),
            or ``lognormal`` (median ``median_s``, shape ``sigma``: long-tailed, the usual model of
            service times; sigma 1.0 gives a mean of 1.65x and a p99 of ~10x the median).
        median_s: scale of the delay in seconds.
        sigma: lognormal shape (ignored by the other kinds).
        max_s: cap on one delay (None: uncapped).
    """

    kind: LatencyKind = "none"
    median_s: float = 0.0
    sigma: float = 1.0
    max_s: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("none", "constant", "exponential", "lognormal"):
            raise ValueError(f"latency kind must be none, constant, exponential or lognormal, got {self.kind!r}")
        if self.median_s < 0 or self.sigma < 0:
            raise ValueError(f"median_s and sigma must be >= 0, got {self.median_s}, {self.sigma}")
        if self.max_s is not None and self.max_s < 0:
            raise ValueError(f"max_s must be >= 0 or None, got {self.max_s}")

    def sample(self, rng: np.random.Generator) -> float:
        """One delay in seconds."""
        if self.kind == "none" or self.median_s == 0:
            d = 0.0
        elif self.kind == "constant":
            d = self.median_s
        elif self.kind == "exponential":
            d = float(rng.exponential(self.median_s))
        else:
            d = float(rng.lognormal(math.log(self.median_s), self.sigma))
        return d if self.max_s is None else min(d, self.max_s)

    @property
    def mean_s(self) -> float:
        """Expected delay (ignoring ``max_s``)."""
        if self.kind == "none":
            return 0.0
        if self.kind == "lognormal":
            return self.median_s * math.exp(self.sigma**2 / 2)
        return self.median_s
