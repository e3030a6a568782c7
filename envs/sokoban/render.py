"""Text rendering and parsing of Sokoban grids, one row per line.

Two symbol sets (``grid_vocab``) are provided:

========================  =========  =====
piece                     default    alt
========================  =========  =====
wall                      ``#``      ``#``
empty floor               ``_``      ``-``
target                    ``O``      ``.``
box                       ``X``      ``$``
box on a target           ``√``      ``*``
player                    ``P``      ``@``
player on a target        ``S``      ``+``
========================  =========  =====

``alt`` is the XSB notation common to Sokoban level collections, with ``-`` for floor so no
row has meaningful trailing spaces.
"""

from __future__ import annotations

from dataclasses import dataclass

from rockroll.envs.errors import EnvConfigError
from rockroll.envs.sokoban.game import SokobanState

__all__ = ["Vocab", "VOCABS", "get_vocab", "render_grid", "parse_grid", "GridCanvas"]


@dataclass(frozen=True)
class Vocab:
    """The symbol of each kind of cell."""

    wall: str
    floor: str
    target: str
    box: str
    box_on_target: str
    player: str
    player_on_target: str

    def legend(self) -> str:
        """One line per symbol, for the agent's instructions."""
        return "\n".join(
            f"  {sym}  {meaning}"
            for sym, meaning in (
                (self.wall, "wall"),
                (self.floor, "empty floor"),
                (self.target, "target (empty)"),
                (self.box, "box"),
                (self.box_on_target, "box on a target"),
                (self.player, "you (the player)"),
                (self.player_on_target, "you, standing on a target"),
            )
        )

    def symbols(self) -> tuple[str, ...]:
        """All seven symbols."""
        return (self.wall, self.floor, self.target, self.box, self.box_on_target, self.player, self.player_on_target)


VOCABS: dict[str, Vocab] = {
    "default": Vocab(wall="#", floor="_", target="O", box="X", box_on_target="√", player="P", player_on_target="S"),
    "alt": Vocab(wall="#", floor="-", target=".", box="$", box_on_target="*", player="@", player_on_target="+"),
}


def get_vocab(name: str) -> Vocab:
    """The vocab called ``name``; raises :class:`~rockroll.envs.errors.EnvConfigError` for an unknown one."""
    if not isinstance(name, str) or name not in VOCABS:
        raise EnvConfigError(
            f"grid_vocab must be one of {sorted(VOCABS)}, got {name!r}", env="SokobanEnv", param="grid_vocab"
        )
    return VOCABS[name]


def _symbol(vocab: Vocab, state: SokobanState, cell: int) -> str:
    if cell in state.walls:
        return vocab.wall
    on_target = cell in state.targets
    if cell == state.player:
        return vocab.player_on_target if on_target else vocab.player
    if cell in state.boxes:
        return vocab.box_on_target if on_target else vocab.box
    return vocab.target if on_target else vocab.floor


def render_grid(state: SokobanState, vocab: Vocab | str = "default") -> str:
    """The grid as text, one row per line (no trailing newline)."""
    v = get_vocab(vocab) if isinstance(vocab, str) else vocab
    cols = state.cols
    return "\n".join("".join(_symbol(v, state, r * cols + c) for c in range(cols)) for r in range(state.rows))


def parse_grid(text: str | list[str], vocab: Vocab | str = "default") -> SokobanState:
    """Read a grid drawn with ``vocab`` (a string with one row per line, or a list of rows).

    Rows must all have the same length, the border must be wall, and there must be exactly one
    player and as many boxes as targets. Raises ``ValueError`` (an
    :class:`~rockroll.envs.errors.EnvConfigError`) otherwise.
    """
    v = get_vocab(vocab) if isinstance(vocab, str) else vocab
    rows = text.strip("\n").split("\n") if isinstance(text, str) else list(text)
    if not rows or not all(isinstance(r, str) for r in rows):
        raise EnvConfigError("a grid needs at least one row of text", env="SokobanEnv", param="grid")
    cols = len(rows[0])
    if cols < 3 or len(rows) < 3 or any(len(r) != cols for r in rows):
        raise EnvConfigError(
            f"grid rows must all have the same length (>= 3), got lengths {[len(r) for r in rows]}",
            env="SokobanEnv",
            param="grid",
        )
    walls: set[int] = set()
    targets: set[int] = set()
    boxes: set[int] = set()
    players: list[int] = []
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            cell = r * cols + c
            if ch == v.wall:
                walls.add(cell)
            elif ch in (v.target, v.box_on_target, v.player_on_target):
                targets.add(cell)
            elif ch not in (v.floor, v.box, v.player):
                raise EnvConfigError(
                    f"unknown symbol {ch!r} at row {r}, column {c}; expected one of {''.join(v.symbols())}",
                    env="SokobanEnv",
                    param="grid",
                )
            if ch in (v.box, v.box_on_target):
                boxes.add(cell)
            elif ch in (v.player, v.player_on_target):
                players.append(cell)
    if len(players) != 1:
        raise EnvConfigError(f"a grid needs exactly one player, found {len(players)}", env="SokobanEnv", param="grid")
    try:
        return SokobanState(len(rows), cols, frozenset(walls), frozenset(targets), boxes, players[0])
    except ValueError as e:
        raise EnvConfigError(f"invalid grid: {e}", env="SokobanEnv", param="grid") from e


class GridCanvas:
    """The rendered text of a state, kept up to date cell by cell so each step costs one join.

    Call :meth:`refresh` with the cells a move touched; :attr:`text` is the cached rendering.
    """

    __slots__ = ("vocab", "state", "_chars", "_stride", "_text")

    def __init__(self, state: SokobanState, vocab: Vocab) -> None:
        self.vocab = vocab
        self.state = state
        self._stride = state.cols + 1  # one extra slot per row holds the newline
        self._chars: list[str] = []
        for r in range(state.rows):
            self._chars.extend(_symbol(vocab, state, r * state.cols + c) for c in range(state.cols))
            self._chars.append("\n")
        self._chars.pop()
        self._text = "".join(self._chars)

    @property
    def text(self) -> str:
        """The grid as text (cached)."""
        return self._text

    def refresh(self, *cells: int) -> str:
        """Redraw ``cells`` (flat indices) and return the new text."""
        cols, stride, chars, state, vocab = self.state.cols, self._stride, self._chars, self.state, self.vocab
        for cell in cells:
            chars[(cell // cols) * stride + cell % cols] = _symbol(vocab, state, cell)
        self._text = "".join(chars)
        return self._text
