"""A simple time manager for GTP's Canadian byo-yomi clocks (``time_settings``, ``time_left``).

GTP v2 (section 4.2) describes one clock per player: ``main_time`` seconds, then byo-yomi
periods of ``byo_yomi_time`` seconds for ``byo_yomi_stones`` moves each. ``byo_yomi_stones = 0``
with ``byo_yomi_time > 0`` means *no time limit*; ``byo_yomi_time = 0`` and
``byo_yomi_stones = 0`` means absolute time (main time only).

The budget for one move:

* no limit (no settings yet, or the "no limit" settings): ``default_per_move`` (None = search by
  visits only);
* in byo-yomi: the period's time left shared by the stones still to play in it;
* in main time: main time left shared by the moves we still expect to play (from the board size
  and the moves played so far), plus one byo-yomi stone's share when byo-yomi follows (the main
  time that is left over is then never lost: the period starts only when it runs out);

then a safety margin (``lag`` seconds, at most 10% of the share) is taken off, the result is
capped by ``default_per_move`` when that is set, and never goes below ``min_time``.
The engine also runs the clock itself (``spend``) so it keeps a sensible budget when the
controller never sends ``time_left``; every ``time_left`` overrides that bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from kosumi.go.coords import BLACK, WHITE


@dataclass
class Clock:
    """One player's clock: ``stones == 0`` means main time (``main`` seconds left); otherwise
    ``period`` seconds are left for ``stones`` more moves in the current byo-yomi period."""

    main: float
    period: float = 0.0
    stones: int = 0


@dataclass(frozen=True)
class TimeSettings:
    main_time: float
    byo_yomi_time: float
    byo_yomi_stones: int

    @property
    def unlimited(self) -> bool:
        return self.byo_yomi_time > 0 and self.byo_yomi_stones == 0

    @property
    def has_byo_yomi(self) -> bool:
        return self.byo_yomi_stones > 0


class TimeManager:
    """Per-move time budgets from GTP clocks."""

    def __init__(
        self,
        default_per_move: float | None = None,
        lag: float = 0.5,
        min_time: float = 0.05,
        game_length: float = 0.7,
    ):
        """``default_per_move``: seconds per move when there is no limit (None: none);
        ``lag``: the safety margin in seconds; ``min_time``: the smallest budget;
        ``game_length``: expected game length as a fraction of the board's points."""
        self.default_per_move = default_per_move
        self.lag = lag
        self.min_time = min_time
        self.game_length = game_length
        self.settings: TimeSettings | None = None
        self.clocks: dict[int, Clock] = {}

    # ----------------------------------------------------------------- GTP commands
    def set_settings(self, main_time: float, byo_yomi_time: float, byo_yomi_stones: int) -> None:
        """``time_settings``: new settings, both clocks full."""
        self.settings = TimeSettings(float(main_time), float(byo_yomi_time), int(byo_yomi_stones))
        self.reset()

    def reset(self) -> None:
        """A new game: both clocks back to the full main time."""
        self.clocks = {}
        if self.settings is not None:
            for c in (BLACK, WHITE):
                self.clocks[c] = self._fresh_clock()

    def set_time_left(self, color: int, seconds: float, stones: int) -> None:
        """``time_left``: ``stones == 0`` means main time; otherwise byo-yomi."""
        seconds = max(0.0, float(seconds))
        if stones <= 0:
            self.clocks[color] = Clock(main=seconds)
        else:
            self.clocks[color] = Clock(main=0.0, period=seconds, stones=int(stones))

    # ----------------------------------------------------------------- budgets
    def budget(self, color: int, moves_played: int, board_size: int) -> float | None:
        """Seconds to think for ``color``'s next move; None means no time limit."""
        s = self.settings
        clock = self.clocks.get(color)
        if s is None or s.unlimited or clock is None:
            return self.default_per_move
        if clock.stones > 0:
            share = clock.period / clock.stones
        else:
            own_moves = self.expected_own_moves(moves_played, board_size)
            share = clock.main / own_moves
            if s.has_byo_yomi:
                share += s.byo_yomi_time / s.byo_yomi_stones
        margin = min(self.lag, 0.1 * share)
        t = share - margin
        if self.default_per_move is not None:
            t = min(t, self.default_per_move)
        return max(self.min_time, t)

    def expected_own_moves(self, moves_played: int, board_size: int) -> float:
        """How many more moves this player expects to make (never fewer than a floor)."""
        points = board_size * board_size
        remaining = max(self.game_length * points - moves_played, 0.15 * points)
        return max(remaining / 2.0, 3.0)

    # ----------------------------------------------------------------- bookkeeping
    def spend(self, color: int, seconds: float) -> None:
        """Charge ``seconds`` to ``color``'s clock (our own move)."""
        s = self.settings
        clock = self.clocks.get(color)
        if s is None or s.unlimited or clock is None:
            return
        if clock.stones == 0:
            clock.main -= seconds
            if clock.main >= 0 or not s.has_byo_yomi:
                clock.main = max(clock.main, 0.0)
                return
            # main time ran out during this move: the first period started then
            overflow = -clock.main
            clock.main = 0.0
            clock.period = s.byo_yomi_time - overflow
            clock.stones = s.byo_yomi_stones - 1
        else:
            clock.period -= seconds
            clock.stones -= 1
        if clock.stones <= 0:  # period completed: a fresh one
            clock.period = s.byo_yomi_time
            clock.stones = s.byo_yomi_stones
        clock.period = max(clock.period, 0.0)

    def _fresh_clock(self) -> Clock:
        s = self.settings
        assert s is not None
        if s.main_time <= 0 and s.has_byo_yomi:
            return Clock(main=0.0, period=s.byo_yomi_time, stones=s.byo_yomi_stones)
        return Clock(main=s.main_time)
