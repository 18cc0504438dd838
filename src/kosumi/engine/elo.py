"""Elo from a match score, with a 95% interval, and a sequential probability ratio test (SPRT).

Everything works on the *score fraction* ``s = (wins + draws / 2) / games`` of one engine and the
logistic Elo model ``s = 1 / (1 + 10 ** (-elo / 400))``.

Interval: the per-game score is a trinomial variable (1, 1/2, 0); its sample variance gives the
standard error of ``s`` (normal approximation), and ``s +/- 1.96 * se`` is mapped through the
inverse logistic. Extreme scores: when every game ended the same way the sample variance is 0,
so the variance of a Bernoulli variable at ``s`` moved half a game towards the middle is used
instead; fractions are clamped to ``[SCORE_CLAMP, 1 - SCORE_CLAMP]`` before the logarithm, which
caps the Elo at about +/-1200 (``EloEstimate.capped`` tells when that happened).

SPRT: the generalized SPRT of Fishtest with the normal approximation: for hypotheses
``H0: elo = elo0`` and ``H1: elo = elo1``,
``LLR = n * (s1 - s0) * (2 * s - s0 - s1) / (2 * var)`` where ``s0``, ``s1`` are the expected
scores under each hypothesis and ``var`` the per-game score variance. H1 is accepted when
``LLR >= log((1 - beta) / alpha)``, H0 when ``LLR <= log(beta / (1 - alpha))``, and not before
``SPRT_MIN_GAMES`` games: the sample variance of a handful of one-sided results is tiny, and
with it the approximation would stop a match after six straight wins.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

SCORE_CLAMP = 1e-3  # |Elo| <= 400 * log10(999) ~ 1199.8
Z95 = 1.959963984540054

H0, H1, CONTINUE = "H0", "H1", "continue"
SPRT_MIN_GAMES = 30  # no verdict before this many games


def expected_score(elo: float) -> float:
    """The expected score of a player ``elo`` points stronger: 1 / (1 + 10^(-elo/400))."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def elo_from_score(score: float) -> float:
    """The Elo difference of a score fraction (clamped to [SCORE_CLAMP, 1 - SCORE_CLAMP])."""
    s = min(max(score, SCORE_CLAMP), 1.0 - SCORE_CLAMP)
    return -400.0 * math.log10(1.0 / s - 1.0) + 0.0  # + 0.0: no '-0.0'


def _check_counts(wins: int, draws: int, losses: int) -> int:
    if min(wins, draws, losses) < 0:
        raise ValueError(f"negative game counts: {wins}/{draws}/{losses}")
    return wins + draws + losses


def score_variance(wins: int, draws: int, losses: int) -> float:
    """Per-game variance of the score (1 / 0.5 / 0), with the half-game rule at extremes."""
    n = _check_counts(wins, draws, losses)
    if n == 0:
        return 0.25
    s = (wins + 0.5 * draws) / n
    var = (wins * (1.0 - s) ** 2 + draws * (0.5 - s) ** 2 + losses * s**2) / n
    if var <= 0.0:
        # every game had the same result: pretend half a game went the other way
        half = 0.5 / n
        s_adj = min(max(s, half), 1.0 - half)
        var = s_adj * (1.0 - s_adj)
    return var


@dataclass(frozen=True)
class EloEstimate:
    """Elo difference with its 95% interval, from one engine's point of view."""

    games: int
    wins: int
    draws: int
    losses: int
    score: float  # fraction in [0, 1]
    elo: float
    low: float  # 95% interval
    high: float
    capped: bool  # the score was 0% or 100% (or the interval hit the clamp)

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        if self.games == 0:
            return "Elo: no games"
        cap = " (capped)" if self.capped else ""
        return f"{self.elo:+.1f} Elo, 95% interval [{self.low:+.1f}, {self.high:+.1f}]{cap}"


def elo_estimate(wins: int, draws: int, losses: int) -> EloEstimate:
    """The Elo difference from a match result, with a 95% confidence interval."""
    n = _check_counts(wins, draws, losses)
    if n == 0:
        return EloEstimate(0, 0, 0, 0, 0.5, 0.0, elo_from_score(0.0), elo_from_score(1.0), True)
    s = (wins + 0.5 * draws) / n
    se = math.sqrt(score_variance(wins, draws, losses) / n)
    lo_s, hi_s = s - Z95 * se, s + Z95 * se
    capped = not (lo_s >= SCORE_CLAMP and hi_s <= 1.0 - SCORE_CLAMP) or s in (0.0, 1.0)
    return EloEstimate(
        games=n,
        wins=wins,
        draws=draws,
        losses=losses,
        score=s,
        elo=elo_from_score(s),
        low=elo_from_score(lo_s),
        high=elo_from_score(hi_s),
        capped=capped,
    )


def sprt_bounds(alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """(lower, upper) log-likelihood-ratio bounds: log(beta/(1-alpha)), log((1-beta)/alpha)."""
    if not (0 < alpha < 1 and 0 < beta < 1):
        raise ValueError("alpha and beta must be in (0, 1)")
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def sprt_llr(wins: int, draws: int, losses: int, elo0: float, elo1: float) -> float:
    """Generalized SPRT log-likelihood ratio of H1 (elo1) against H0 (elo0), normal approx."""
    n = _check_counts(wins, draws, losses)
    if n == 0:
        return 0.0
    s = (wins + 0.5 * draws) / n
    var = score_variance(wins, draws, losses)
    s0, s1 = expected_score(elo0), expected_score(elo1)
    return n * (s1 - s0) * (2.0 * s - s0 - s1) / (2.0 * var)


@dataclass(frozen=True)
class SPRTResult:
    elo0: float
    elo1: float
    alpha: float
    beta: float
    llr: float
    lower: float
    upper: float
    verdict: str  # "H0" (elo0 accepted), "H1" (elo1 accepted) or "continue"

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        what = {H0: f"H0 accepted (elo <= {self.elo0:g})",
                H1: f"H1 accepted (elo >= {self.elo1:g})", CONTINUE: "continue"}[self.verdict]
        return (f"SPRT [{self.elo0:g}, {self.elo1:g}]: LLR {self.llr:+.3f} "
                f"(bounds {self.lower:+.3f}, {self.upper:+.3f}): {what}")


def sprt(
    wins: int,
    draws: int,
    losses: int,
    elo0: float,
    elo1: float,
    alpha: float = 0.05,
    beta: float = 0.05,
) -> SPRTResult:
    """Test H0: elo = elo0 against H1: elo = elo1 (elo0 < elo1) on the games so far (no
    verdict before ``SPRT_MIN_GAMES``)."""
    if not elo0 < elo1:
        raise ValueError(f"SPRT needs elo0 < elo1 (got {elo0:g}, {elo1:g})")
    lower, upper = sprt_bounds(alpha, beta)
    llr = sprt_llr(wins, draws, losses, elo0, elo1)
    verdict = H1 if llr >= upper else H0 if llr <= lower else CONTINUE
    if wins + draws + losses < SPRT_MIN_GAMES:
        verdict = CONTINUE
    return SPRTResult(elo0, elo1, alpha, beta, llr, lower, upper, verdict)


def parse_sprt(text: str) -> tuple[float, float]:
    """'elo0,elo1' (e.g. '0,50') -> (elo0, elo1). Raises ValueError with a readable message."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2:
        raise ValueError(f"--sprt expects 'elo0,elo1', got {text!r}")
    try:
        elo0, elo1 = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"--sprt expects two numbers 'elo0,elo1', got {text!r}") from None
    if not elo0 < elo1:
        raise ValueError(f"--sprt needs elo0 < elo1, got {text!r}")
    return elo0, elo1
