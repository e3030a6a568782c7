"""Room generation by reverse play: every generated room is solvable.

:func:`generate_room` repeats, until a room is accepted (at most ``max_attempts`` times):

1. **Layout.** A random walk carves floor out of a room of walls (the border stays wall), so
   the floor is one connected area covering roughly 55-80% of the interior.
2. **Targets.** ``num_boxes`` floor cells become targets, each with a box on it (solved state).
3. **Reverse play.** A breadth-first search over *pull* moves: the player stands next to a box,
   steps away from it and drags it along. A position is ``(boxes, region)`` where ``region`` is
   the set of cells the player can walk to (walking is free, so positions differ only by the
   region). The search starts from every region of the solved position and stops after
   ``search_depth`` pulls. Reversing a pull sequence gives a push sequence, so every position
   reached is solvable, and since the search is breadth-first its depth is the *minimum number
   of pushes* needed to solve it. In big rooms with many boxes a layer may outgrow
   ``max_states // search_depth`` positions; it is then cut to that many, keeping those with
   the most boxes off target (a beam search: still solvable, the depth is then an upper bound).
4. **Choice.** Among the positions with every box off its target, one of those needing the most
   pushes is chosen at random, and the player is put on a random cell of its region. A layout
   is discarded when that is fewer than ``num_boxes + 1`` pushes (so a lone box needs at least
   two pushes; after half the attempts ``num_boxes`` pushes are accepted).

Bitmasks (Python ints, bit ``i`` = cell ``i``) keep the search small and fast: a 6x6 room with
one box is generated in well under a millisecond. All randomness comes from the ``rng`` given,
so the same seed gives the same room.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from rockroll.envs.errors import EnvConfigError
from rockroll.envs.sokoban.errors import GenerationError
from rockroll.envs.sokoban.game import SokobanState, direction_offsets

__all__ = [
    "GeneratedRoom",
    "generate_room",
    "max_boxes",
    "check_room_params",
    "MIN_DIM",
    "MAX_DIM",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_STATES",
]

MIN_DIM = 4
MAX_DIM = 20
DEFAULT_MAX_ATTEMPTS = 200
DEFAULT_MAX_STATES = 30_000
_MAX_SEARCH_DEPTH = 1000


@dataclass(frozen=True)
class GeneratedRoom:
    """A generated room.

    Attributes:
        state: the starting position (player, boxes off their targets).
        pushes: box pushes of the reverse-play solution found (its pulls, reversed).
        exact: whether the search was exhaustive, so that ``pushes`` is the fewest pushes that
            solve the room (True for small rooms; False when the beam cut the search).
        attempts: how many layouts were tried before this one was accepted.
    """

    state: SokobanState
    pushes: int
    exact: bool
    attempts: int


def max_boxes(dim_room: tuple[int, int]) -> int:
    """The most boxes :func:`generate_room` accepts for a room of this size.

    One box per 6 interior cells (the border is wall), at least 1 and at most 10: denser rooms
    rarely let every box leave its target, and more boxes make the reverse search slow
    (a 20x20 room with 10 boxes already takes a few hundred milliseconds).
    """
    rows, cols = dim_room
    return max(1, min(10, (rows - 2) * (cols - 2) // 6))


def check_room_params(dim_room: object, num_boxes: object, search_depth: object, env: str = "SokobanEnv") -> None:
    """Raise :class:`~rockroll.envs.errors.EnvConfigError` (naming the parameter) for invalid settings."""
    if (
        not isinstance(dim_room, (tuple, list))
        or len(dim_room) != 2
        or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dim_room)
    ):
        raise EnvConfigError(
            f"dim_room must be a pair of ints (rows, cols), got {dim_room!r}", env=env, param="dim_room"
        )
    rows, cols = (int(d) for d in dim_room)
    if not (MIN_DIM <= rows <= MAX_DIM and MIN_DIM <= cols <= MAX_DIM) or max(rows, cols) < 5:
        raise EnvConfigError(
            f"dim_room sides must be between {MIN_DIM} and {MAX_DIM} (border walls included) and at least one "
            f"side must be >= 5 so a box can be pushed; got {dim_room!r}",
            env=env,
            param="dim_room",
        )
    if isinstance(num_boxes, bool) or not isinstance(num_boxes, (int, np.integer)) or num_boxes < 1:
        raise EnvConfigError(f"num_boxes must be an int >= 1, got {num_boxes!r}", env=env, param="num_boxes")
    limit = max_boxes((rows, cols))
    if num_boxes > limit:
        raise EnvConfigError(
            f"num_boxes={num_boxes} is too many for a {rows}x{cols} room: the maximum is {limit} "
            f"(one box per 6 interior cells, at most 10)",
            env=env,
            param="num_boxes",
        )
    if (
        isinstance(search_depth, bool)
        or not isinstance(search_depth, (int, np.integer))
        or not 1 <= search_depth <= _MAX_SEARCH_DEPTH
    ):
        raise EnvConfigError(
            f"search_depth must be an int between 1 and {_MAX_SEARCH_DEPTH}, got {search_depth!r}",
            env=env,
            param="search_depth",
        )
    if search_depth < num_boxes:
        raise EnvConfigError(
            f"search_depth={search_depth} is too small for {num_boxes} boxes: every box must be pulled off its "
            f"target at least once, so search_depth must be >= num_boxes",
            env=env,
            param="search_depth",
        )


def _as_random(rng: np.random.Generator | random.Random | int | None) -> random.Random:
    """A ``random.Random`` derived deterministically from ``rng`` (much faster per draw)."""
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, np.random.Generator):
        return random.Random(int(rng.integers(0, 2**63)))
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return random.Random(rng)
    raise TypeError(f"rng must be a numpy Generator, random.Random, int or None, got {type(rng).__name__}")


def generate_room(
    dim_room: tuple[int, int] = (6, 6),
    num_boxes: int = 1,
    search_depth: int = 30,
    rng: np.random.Generator | random.Random | int | None = None,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    max_states: int = DEFAULT_MAX_STATES,
) -> GeneratedRoom:
    """Generate a solvable room (see the module docstring for the method).

    Args:
        dim_room: ``(rows, cols)``, border walls included.
        num_boxes: boxes (and targets) in the room, 1 to :func:`max_boxes`.
        search_depth: the most pulls the reverse search explores; bounds the pushes needed.
        rng: source of randomness: a numpy ``Generator`` (an env's ``np_random``), a
            ``random.Random``, an int seed, or None for fresh entropy.
        max_attempts: layouts tried before giving up.
        max_states: positions the reverse search may visit per layout.

    Raises:
        EnvConfigError: invalid ``dim_room``, ``num_boxes`` or ``search_depth``.
        GenerationError: no layout was accepted within ``max_attempts``.
    """
    check_room_params(dim_room, num_boxes, search_depth)
    for name, value in (("max_attempts", max_attempts), ("max_states", max_states)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise EnvConfigError(f"{name} must be a positive int, got {value!r}", env="SokobanEnv", param=name)
    rows, cols = int(dim_room[0]), int(dim_room[1])
    num_boxes, search_depth = int(num_boxes), int(search_depth)
    rand = _as_random(rng)
    for attempt in range(1, max_attempts + 1):
        floor = _carve_floor(rows, cols, num_boxes, rand)
        if len(floor) < num_boxes + 2:
            continue
        targets = rand.sample(floor, num_boxes)
        # insist on one push more than the number of boxes, unless layouts keep failing
        min_pushes = num_boxes + 1 if attempt <= max_attempts // 2 else num_boxes
        found = _reverse_search(rows, cols, floor, targets, search_depth, max_states, min_pushes, rand)
        if found is None:
            continue
        boxes_mask, region_mask, pushes, exact = found
        player = rand.choice(_bits(region_mask))
        walls = frozenset(range(rows * cols)) - frozenset(floor)
        state = SokobanState(rows, cols, walls, frozenset(targets), set(_bits(boxes_mask)), player)
        return GeneratedRoom(state=state, pushes=pushes, exact=exact, attempts=attempt)
    raise GenerationError((rows, cols), num_boxes, max_attempts)


def _carve_floor(rows: int, cols: int, num_boxes: int, rand: random.Random) -> list[int]:
    """Floor cells carved by a random walk that turns now and then and sometimes widens."""
    interior = (rows - 2) * (cols - 2)
    wanted = round(interior * rand.uniform(0.55, 0.8))
    wanted = min(interior, max(wanted, 3 * num_boxes + 3))
    offsets = direction_offsets(cols)

    def inside(cell: int) -> bool:
        r, c = divmod(cell, cols)
        return 0 < r < rows - 1 and 0 < c < cols - 1

    pos = (rand.randrange(1, rows - 1)) * cols + rand.randrange(1, cols - 1)
    floor = {pos}
    order = [pos]
    step = rand.choice(offsets)
    for _ in range(interior * 20):
        if len(floor) >= wanted:
            break
        if rand.random() < 0.35:
            step = rand.choice(offsets)
        nxt = pos + step
        if not inside(nxt):
            step = rand.choice(offsets)
            continue
        pos = nxt
        if pos not in floor:
            floor.add(pos)
            order.append(pos)
        if rand.random() < 0.2:
            side = pos + rand.choice(offsets)
            if inside(side) and side not in floor:
                floor.add(side)
                order.append(side)
    return order  # insertion order, so sampling from it is deterministic


def _bits(mask: int) -> list[int]:
    """Indices of the set bits of ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _fill(seed: int, free: int, cols: int) -> int:
    """Bitmask of the cells reachable from the ``seed`` bitmask through ``free`` cells."""
    region = seed
    while True:
        grown = (region | (region << 1) | (region >> 1) | (region << cols) | (region >> cols)) & free
        if grown == region:
            return region
        region = grown


def _reverse_search(
    rows: int,
    cols: int,
    floor: list[int],
    targets: list[int],
    search_depth: int,
    max_states: int,
    min_pushes: int,
    rand: random.Random,
) -> tuple[int, int, int, bool] | None:
    """Breadth-first search over pulls from the solved position.

    Returns ``(boxes_mask, region_mask, pushes, exact)`` of a randomly chosen position among
    those with every box off target and the most pushes (at least ``min_pushes``), or None. When
    a layer grows past ``max_states // search_depth`` positions, only that many are kept, those
    with the most boxes off target first (a beam), and ``exact`` is False.
    """
    free = 0
    for cell in floor:
        free |= 1 << cell
    target_mask = 0
    for cell in targets:
        target_mask |= 1 << cell
    offsets = direction_offsets(cols)
    width = max(100, max_states // search_depth)

    # depth 0: the solved position, once per region the player could be in
    seen: dict[int, int] = {target_mask: 0}  # boxes mask -> union of regions already visited
    layer: list[tuple[int, int]] = []
    player_free = free & ~target_mask
    remaining = player_free
    while remaining:
        region = _fill(remaining & -remaining, player_free, cols)
        seen[target_mask] |= region
        layer.append((target_mask, region))
        remaining &= ~region

    best: list[tuple[int, int]] = []
    best_depth = 0
    visited = len(layer)
    exact = True
    depth = 0
    while layer and depth < search_depth and visited < max_states:
        depth += 1
        if len(layer) > width:
            exact = False
            rand.shuffle(layer)
            layer.sort(key=lambda s: (s[0] & ~target_mask).bit_count(), reverse=True)
            del layer[width:]
        nxt: list[tuple[int, int]] = []
        for boxes, region in layer:
            if len(nxt) >= 2 * width or visited + len(nxt) >= max_states:
                exact = False
                break
            for box in _bits(boxes):
                for off in offsets:
                    stand = box + off
                    if not (region >> stand) & 1:
                        continue
                    dest = stand + off
                    if not (free >> dest) & 1 or (boxes >> dest) & 1:
                        continue
                    new_boxes = boxes ^ (1 << box) ^ (1 << stand)
                    known = seen.get(new_boxes, 0)
                    if (known >> dest) & 1:
                        continue
                    new_region = _fill(1 << dest, free & ~new_boxes, cols)
                    seen[new_boxes] = known | new_region
                    nxt.append((new_boxes, new_region))
        visited += len(nxt)
        layer = nxt
        complete = [s for s in nxt if not s[0] & target_mask]
        if complete:
            best, best_depth = complete, depth
    if not best or best_depth < min_pushes:
        return None
    boxes, region = rand.choice(best)
    return boxes, region, best_depth, exact
