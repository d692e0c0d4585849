"""A GP bandit that chooses the number of partitions ``d`` as well as the points, every round.

The paper's conclusion leaves this open: its bandit, like every other schedule, takes ``d`` as a
hyperparameter fixed for the whole run. :class:`AdaptiveDBanditSchedule` chooses, at the end of
every window, a schedule of any ``d`` in ``[d_min, d_max]``: a pair ``(d, arm of d - 1 points)``.

The surrogate: one GP over schedules of every length
----------------------------------------------------
The TVO sees a schedule only through its left Riemann sum, ``int_0^1 f(s_b(u)) du`` with ``s_b``
the schedule's left-Riemann step function (:mod:`tvolib.bandit.embedding`). So one GP compares
schedules of every length by comparing their step functions: its arm kernel is

    k_b(b, b') = exp(-||phi(b) - phi(b')||^2 / (2 l^2)),
    ||phi(b) - phi(b')||^2 ~ int_0^1 (s_b(u) - s_b'(u))^2 du,

with ``phi`` the step function, smoothed and evaluated on a grid of 100 betas (no warp of the
betas) (:class:`~tvolib.bandit.kernels.StepFunctionKernel`). The rest of the GP is the package's:
``k = (1 - phi_trend) k_b k_T + phi_trend k_trend`` with the paper's time kernel ``k_T`` and the
``tvolib`` protocol's trend (:class:`~tvolib.bandit.model.BanditGP`), hyperparameters by type-II
ML (:func:`~tvolib.bandit.fit.fit_ml`), rewards standardised, windows and rewards of
:class:`~tvolib.bandit.base.BanditScheduleBase`. Why one GP over an embedding rather than a
hierarchy (first ``d``, then the points by a GP per ``d``):

* every reward informs every ``d``: a ``d = 5`` arm whose points bunch up is (up to the 1e-4 gaps
  of the projection) a ``d = 3`` schedule, and its reward tells the GP about ``d = 3`` too; a
  hierarchy splits the rounds between ``d_max - d_min + 1`` GPs, each with a few observations;
* the embedding is invariant to permutations of the points (sorted by construction) and to points
  tied with a neighbour, and defined for any ``d``: the GP's input is the arm padded to
  ``d_max - 1`` points by repeating its largest (:func:`~tvolib.bandit.embedding.pad_arm`),
  which adds intervals of width zero and leaves ``phi`` as it is;
* the kernel is positive definite (a squared exponential of a feature map) and differentiable in
  the points (smoothed steps), so BoTorch's L-BFGS-B acquisition runs on it unchanged.

The noise
---------
The kernel has no output scale (rewards are standardised, the paper's Appendix B), so the noise
variance is the share of the rewards' variance the GP may leave unexplained. The authors' code
bounds it by 0.5, which binds: on the test bed 48% to 69% of a run's reward variance is noise (52%
to 99% of its last 60 rounds'), and the fits sit on 0.5 in nearly all late rounds, fitting part of
the noise as signal. Revision 5 bounds it by :data:`NOISE_UPPER`, all of the variance; the fits
then lie inside (late medians 0.39 to 0.66; ``docs/adaptive-d.md``, *Revision 5*).

The acquisition
---------------
GP-UCB of the arm effect (Eq. 17, :class:`~tvolib.bandit.acquisition.GPUCB`) at the next round's
time, for each ``d`` in ``[d_min, d_max]`` over that ``d``'s arm domain (the staggered domain of
the ``tvolib`` and ``code`` protocols, ``[lo, hi k / (d - 1)]``), through
:class:`~tvolib.bandit.acquisition.PaddedArms`. One budget serves every ``d``: random arms of each
domain are scored, and the best of all of them start L-BFGS-B in their own ``d``'s domain. Every
value is the same GP's at the same time, so they compare across ``d``.

Which ``d`` (``d_choice``)
--------------------------
The largest GP-UCB value cannot choose ``d``: a schedule of more points can copy one of fewer by
tying points, so the largest ``d``'s best value is never below a smaller one's but for the
acquisition's noise, and the search would drift to ``d_max`` whether or not the points help.

* ``"thompson"`` (default): Thompson sampling between the ``d``'s. One joint draw of the arm
  effect from the GP's posterior at every ``d``'s GP-UCB maximiser
  (:meth:`~tvolib.bandit.model.BanditGP.joint_posterior`); the ``d`` with the largest draw trains
  its maximiser. Each ``d`` is chosen with the posterior probability that its candidate is the
  best, so a ``d`` whose gain the GP is unsure of keeps being tried until the GP knows, and a
  ``d`` no better than a smaller one (tied points) wins only its share of the draws. There is no
  constant to set. It does not prefer fewer points.
* ``"margin"``: parsimony. ``d`` is the smallest whose best value is within
  ``margin = d_tolerance sqrt(kappa (1 - phi_trend))`` of the largest (``d_tolerance``, 0.2, of the
  exploration bonus of an arm the GP knows nothing about, ``sqrt(kappa)`` times the arm effect's
  prior standard deviation ``sqrt(1 - phi_trend)``); then points of the chosen arm are dropped one
  at a time (each time the one whose loss costs least) while its value stays within the same
  margin and ``d >= d_min``. A dropped point can leave an arm outside its new ``d``'s staggered
  domain (still in the box); the domain only shapes where random arms and the acquisition search.

Which ``d`` the bandit recommends
---------------------------------
Thompson sampling trains every ``d`` whose candidate may be the best, so the ``d`` it trains does
not say how many points the run needs. Every GP round also records a recommendation
(:mod:`tvolib.bandit.recommendation`: the fewest points whose candidate's lower bound is within
:data:`~tvolib.bandit.recommendation.RECOMMENDATION_TOLERANCE` standard deviations of the best's,
each ``d``'s candidate the better of its posterior-mean maximiser and its observed arms;
:meth:`AdaptiveDBanditSchedule.recommendation`). The recommendation's search is seeded from the
round's seed and draws nothing from the schedule's generator, so the arms trained are those of a
schedule that recommends nothing. It is one search per ``d``: Fig 13's ``quick`` runs took
0.38-0.45 minutes a seed on a 2-core AMD CPU, the bandits at a fixed ``d`` 0.22-0.27.

The random rounds draw ``d`` uniformly from ``[d_min, d_max]``, then an arm from its domain. The
corner guards are the code's two pseudo-observations, (padded) the schedules ``[0, lo]`` and ``[0,
hi]``; a proposal at its domain's all-lower corner is replaced by a random round's arm.

On the test bed
---------------
The step cases of :mod:`tvolib.bandit.testbed` compare schedules of any length by their step
functions; ``docs/adaptive-d.md`` has the tables. Where the rewards can tell ``d`` (the ``-quiet``
cases, whose noise lets an oracle tell each case's ``d`` from one point fewer by three standard
errors in 160 epochs), the recommendation is the right ``d`` on most seeds in every case: at 480
epochs (about 80 rounds), on seeds 36 to 71, run after its rule was fixed, 3 on 35 of 36 where
two interior points are best, 5 on 23 of 36 where four are (never fewer), 10 on 21 of 36 where
nine are (9 or 8 on the others: its ten-point candidates, 0.05 to 0.16 from the optimum, are
mostly too far for the ninth point's 0.048 to stand out; over seeds 0 to 71, 68, 44 and 43). At
the default noise, most of the rewards' variance, it is not in two of the three (seeds 0 to 11):
3 on 4 of 12, 5 on 7 of 12, 6 to 9 where nine interior points are best (there even the oracle
tells 9 points from 10 by only 1.05 standard errors). Thompson sampling
trains at a regret below the bandit fixed at the wrong ``d`` in every case, but at the default
noise more points than needed where fewer suffice. The margin rule (revision 1) trains ``d = 3``
where three are best but 2 to 5 points where ten are; no rule for training tried serves both.

Example:
    >>> sched = AdaptiveDBanditSchedule(d_max=6, window=2, seed=0, device="cpu")
    >>> sched.step(0, evidence=-100.0)
    >>> sched.step(1, evidence=-99.0); sched.step(2, evidence=-98.0)
    >>> row = sched.history()[0]
    >>> row["d"] == len(row["arm"]) + 1 and 2 <= row["next_d"] <= 6
    True
"""
from __future__ import annotations

import math
import time
from typing import Any

import torch
from gpytorch.priors import LogNormalPrior
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from ..checks import check_finite_float, check_int, plain_value
from ..tvo import log_uniform
from .acquisition import GPUCB, PaddedArms, acquisition_budget, arm_effect_posterior, maximize_ucb
from .embedding import pad_arm
from .fit import fit_map, fit_ml
from .kernels import StepFunctionKernel
from .model import BanditGP, training_data
from .posterior import observations, observed_rows
from .protocol import ml_bounds, size_defaults, staggered_upper
from .recommendation import RECOMMENDATION_FIELDS, highest_lower_bound, one_standard_error_rule
from .scheduler import GPBanditSchedule

__all__ = ["D_CHOICES", "EMBEDDING_DIAMETER", "NOISE_UPPER", "AdaptiveDBanditSchedule"]

#: How each round's ``d`` is chosen (module docstring): ``"thompson"`` (one joint posterior draw at
#: every ``d``'s GP-UCB maximiser, the largest draw wins) or ``"margin"`` (the smallest ``d`` within
#: a parsimony margin of the best GP-UCB value, then points dropped within the same margin).
D_CHOICES = ("thompson", "margin")

#: About the largest distance between step-function embeddings of arms of the default domain (box
#: ``[0.05, 0.95]``, staggered, ``d = 2..10``: 0.47 on random arms; at most 0.58 for any
#: schedules): the ML fit bounds the embedding's length scale by the protocol's bounds for a
#: domain of diameter 1 times this.
EMBEDDING_DIAMETER = 0.5

#: The ML fit's upper bound of the noise variance: all of the standardised rewards' variance (module
#: docstring, *The noise*; the protocol's bound, the authors' code's 0.5, binds on the test bed).
NOISE_UPPER = 1.0

#: Offsets the seed of the recommendation's search from the round's (the GP-UCB search's) seed.
RECOMMENDATION_SEED_OFFSET = 7919


class AdaptiveDBanditSchedule(GPBanditSchedule):
    """GP-bandit schedule choosing ``d`` in ``[d_min, d_max]`` and the points every round (module docstring).

    Args:
        d_max: the largest number of left points, ``b_0 = 0`` included (>= 3).
        d_min: the smallest (>= 2, below ``d_max``).
        d_choice: how ``d`` is chosen, one of :data:`D_CHOICES` (default ``"thompson"``).
        d_tolerance: for ``d_choice="margin"``: the parsimony margin as a share of an unknown arm's
            exploration bonus (>= 0; module docstring), the GP-UCB value a point must add to be kept.
        n_init: random rounds until this many finite observations (default: the protocol's for a
            fixed ``d = d_min + 3``, 15 for ``d_min = 2``: the GP's input, the step function, does
            not grow with ``d_max``).
        max_observations: default the protocol's for ``d = d_max``.
        **options: every other keyword of :class:`~tvolib.bandit.GPBanditSchedule` but ``d`` and
            ``sort`` (the embedding is permutation invariant by construction); ``ml_bounds``
            names the length-scale bounds for a domain of diameter 1, stretched to the
            embedding's (:data:`EMBEDDING_DIAMETER`).

    Attributes:
        d: the number of left points trained now (``len(current())``), changing between rounds.
        d_max, d_min: the range.
        n_arm: the GP's arm columns, ``d_max - 1`` (arms are padded to it).

    Every round of :meth:`history` records the ``d`` it trained (``d``), the next one (``next_d``),
    ``d_min``, ``d_max``, and for GP rounds the best GP-UCB value found for each ``d``
    (``acq_by_d``, standardised units), the Thompson draws (``d_draws``, same units; ``"thompson"``)
    and the points parsimony dropped (``points_dropped``; 0 under ``"thompson"``), and the
    round's recommendation (:data:`~tvolib.bandit.recommendation.RECOMMENDATION_FIELDS`;
    :meth:`recommendation`).
    """

    #: Version of this class's choices beyond the bandit family's (part of its runs' digests only):
    #: 6, the recommendation's candidates include the observed arms, its tolerance
    #: :data:`~tvolib.bandit.recommendation.RECOMMENDATION_TOLERANCE`; 5, noise up to
    #: :data:`NOISE_UPPER`, recommendation by lower bounds; 4, each ``d`` searched on its own; 3, a
    #: recommendation recorded; 2, Thompson sampling of ``d`` (1: the margin rule).
    D_CHOICE_REVISION = 6

    def __init__(self, d_max: int, *, d_min: int = 2, d_choice: str = "thompson", d_tolerance: float = 0.2,
                 n_init: int | None = None, max_observations: int | None = None, **options: Any) -> None:
        self.d_max, self.d_min = self._check_range(d_max, d_min)
        d_choice = plain_value(d_choice)  # a NumPy string as a str
        if not isinstance(d_choice, str) or d_choice not in D_CHOICES:
            raise ValueError(f"d_choice must be one of {', '.join(map(repr, D_CHOICES))}; got {d_choice!r}")
        self.d_choice = d_choice
        self.d_tolerance = check_finite_float("d_tolerance", d_tolerance, minimum=0.0)
        for name in ("d", "sort"):
            if name in options:
                raise ValueError(f"{type(self).__name__} takes no {name!r}: it chooses d in [d_min, d_max] every "
                                 "round, and its embedding is invariant to the points' order by construction")
        protocol = options.setdefault("protocol", "tvolib")  # its own: the integrand preset is GPBanditSchedule's
        super().__init__(
            self.d_max,
            n_init=size_defaults(protocol, self.d_min + 3)[0] if n_init is None else n_init,
            max_observations=size_defaults(protocol, self.d_max)[1] if max_observations is None else max_observations,
            **options,
        )
        self._arm = self._random_round_arm().tolist()

    @staticmethod
    def _check_range(d_max: Any, d_min: Any) -> tuple[int, int]:
        d_min = check_int("d_min (the fewest left points, b_0 = 0 included)", d_min, 2)
        d_max = check_int("d_max (the most left points, b_0 = 0 included)", d_max, 3)
        if d_max <= d_min:
            raise ValueError(f"d_max must exceed d_min for d to be chosen; got d_min={d_min}, d_max={d_max} "
                             f"(a fixed d is GPBanditSchedule(d=...))")
        return d_max, d_min

    def _domain_upper(self, d: int) -> tuple[float, ...]:
        """Upper bounds of the sorted arm's coordinates for ``d`` left points (the protocol's domain)."""
        if self.arm_domain == "staggered":
            return staggered_upper(d, *self.box)
        return (self.box[1],) * (d - 1)

    # ----- the Schedule interface ------------------------------------------------------------
    @property
    def d(self) -> int:
        return len(self._arm) + 1

    @property
    def arm_sizes(self) -> range:
        return range(self.d_min - 1, self.d_max)

    def current(self) -> Tensor:
        if self.burn_in_schedule == "log" and self.in_burn_in:
            return log_uniform(self.d)
        return super().current()

    # ----- arms ------------------------------------------------------------------------------
    def _random_arm(self, d: int | None = None) -> Tensor:
        """A uniform draw in the domain of ``d`` left points (default ``d_max``), finalised."""
        d = self.d_max if d is None else d
        span = torch.tensor(self._domain_upper(d), dtype=torch.float64) - self.lo
        raw = self.lo + span * torch.rand(d - 1, generator=self._gen, dtype=torch.float64)
        return self._finalise_arm(raw)

    def _random_round_arm(self) -> Tensor:
        """A random round's arm: ``d`` uniform in ``[d_min, d_max]``, then a uniform arm of its domain."""
        d = int(torch.randint(self.d_min, self.d_max + 1, (1,), generator=self._gen))
        return self._random_arm(d)

    def _padded_history(self) -> list[dict[str, Any]]:
        return [{**row, "arm": pad_arm(row["arm"], self.n_arm)} for row in self._history]

    def _at_lower_corner(self, arm: Tensor) -> bool:
        return bool((arm <= self.lo + self._gap * (arm.numel() - 1) + 1e-12).all())

    def _choose_next(self) -> dict[str, Any]:
        arms, rounds, rewards = observations(self._padded_history(), max_observations=self.max_observations)
        if rewards.numel() < self.n_init:
            self._arm = self._random_round_arm().tolist()
            return {**self._empty_decision("random"), "acq_by_d": None, "d_draws": None, "next_d": self.d,
                    "points_dropped": None, **dict.fromkeys(RECOMMENDATION_FIELDS)}
        t_pred = self._round + 1
        data = training_data(
            arms, rounds, rewards, lo=self.lo, hi=self.hi, t_pred=t_pred, standardize=self.standardize,
            guards=self.corner_arms() if self.corner_guards else None, device=self.device,
        )
        gp = self._gp()
        gp.set_train_data(data.X, data.y)
        if self.fit == "map":
            fit = fit_map(gp, maxiter=self.fit_maxiter)
        else:
            fit = fit_ml(gp, n_starts=self.ml_starts, generator=self._gen, maxiter=self.fit_maxiter,
                         bounds=self.fit_bounds())
        self._hp = fit.hyperparameters
        kappa = self.current_kappa(self._round + 1, int(rewards.numel()))
        round_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self._gen))
        start = time.perf_counter()
        best = self._maximise(gp, kappa, round_seed)
        acq_seconds = time.perf_counter() - start
        recommendation = self._recommend(gp, (round_seed + RECOMMENDATION_SEED_OFFSET) % 2**31)
        values = {d: value for d, (_, value) in best.items()}
        draws = None
        if self.d_choice == "thompson":
            draws = self._thompson_draws(gp, best, int(torch.randint(0, 2**31 - 1, (1,), generator=self._gen)))
            d = max(draws, key=draws.__getitem__)
            (x, value), n_dropped = best[d], 0
        else:
            top = max(values.values())
            trend_share = fit.hyperparameters.trend_share if self.trend else 0.0
            margin = self.d_tolerance * math.sqrt(kappa * (1.0 - trend_share))
            d = min(k for k, v in values.items() if v >= top - margin)
            x, value, n_dropped = self._simplify(gp, kappa, *best[d], top - margin)
        arm, source = self._finalise_arm(self.lo + (self.hi - self.lo) * x.cpu()), "gp"
        if self.corner_guards and self._at_lower_corner(arm):
            arm, source = self._random_round_arm(), "corner"
        self._arm = arm.tolist()
        hp = fit.hyperparameters
        return {
            "source": source, "lengthscale": hp.lengthscale, "omega": hp.omega if self.time_varying else 0.0,
            "rho": hp.rho, "noise": hp.noise, "trend_share": hp.trend_share if self.trend else None,
            "trend_lengthscale": hp.trend_lengthscale if self.trend else None, "kappa": kappa,
            "acq_value": value, "fit_seconds": fit.seconds, "acq_seconds": acq_seconds, "fit_ok": fit.ok,
            "fit_evals": fit.n_evals, "n_obs": int(rewards.numel()), "n_dropped": data.n_dropped,
            "t_origin": data.t_origin, "t_pred": t_pred, "y_mean": data.y_mean, "y_std": data.y_std,
            "acq_by_d": [values[k] for k in sorted(values)],
            "d_draws": None if draws is None else [draws[k] for k in sorted(draws)],
            "next_d": self.d, "points_dropped": n_dropped, **recommendation,
        }

    def _recommend(self, gp: BanditGP, seed: int) -> dict[str, Any]:
        """This round's recommendation (:mod:`tvolib.bandit.recommendation`): each ``d``'s candidate
        is the highest lower bound among its posterior-mean maximiser at the next round's time and
        the arms of ``d`` points the GP has observed, and the one-standard-error rule
        (:func:`~tvolib.bandit.recommendation.one_standard_error_rule`) chooses among them. Draws
        nothing from the schedule's generator (``seed`` seeds its search), so the arms trained are
        those of a schedule that recommends nothing."""
        means = self._maximise_each(gp, 0.0, seed)  # GP-UCB at kappa = 0 is the posterior mean
        ds = sorted(means)
        observed = self._observed_arms(means[ds[0]][0])
        candidates = [highest_lower_bound(gp, [*observed.get(d, []), means[d][0]]) for d in ds]
        mean, cov = arm_effect_posterior(gp, candidates)
        rule = one_standard_error_rule(mean, cov)
        arm = self._finalise_arm(self.lo + (self.hi - self.lo) * candidates[rule.index].cpu())
        return {"recommended_d": ds[rule.index], "recommended_arm": arm.tolist(), "mean_by_d": mean.tolist(),
                "sd_by_d": rule.sd.tolist(), "gap_sd_by_d": rule.gap_sd.tolist()}

    def _observed_arms(self, like: Tensor) -> dict[int, list[Tensor]]:
        """The distinct arms the GP has observations of (:func:`~tvolib.bandit.posterior.observed_rows`),
        by ``d``, in its normalised units, each once, on ``like``'s device and dtype."""
        arms = [tuple(row["arm"]) for row in observed_rows(self._history, max_observations=self.max_observations)]
        by_d: dict[int, list[Tensor]] = {}
        for arm in dict.fromkeys(arms):
            by_d.setdefault(len(arm) + 1, []).append(((torch.tensor(arm, dtype=torch.float64) - self.lo)
                                                      / (self.hi - self.lo)).to(like))
        return by_d

    def recommendation(self) -> Tensor | None:
        """The schedule the bandit recommends now, float64 ``(d,)`` with ``b_0 = 0``: the last GP
        round's ``recommended_arm`` (:mod:`tvolib.bandit.recommendation`), ``None`` before the first GP round. What
        to train a run of fixed ``d`` with; this run goes on training :meth:`current`.

        Example:
            >>> AdaptiveDBanditSchedule(d_max=6, device="cpu").recommendation() is None
            True
        """
        rows = [row for row in self._history if row.get("recommended_arm") is not None]
        if not rows:
            return None
        return torch.tensor([0.0, *rows[-1]["recommended_arm"]], dtype=torch.float64)

    @staticmethod
    def _thompson_draws(gp: BanditGP, best: dict[int, tuple[Tensor, float]], seed: int) -> dict[int, float]:
        """One joint draw of the arm effect, from the GP's posterior, at every ``d``'s GP-UCB
        maximiser (``best``: ``d`` -> normalised points and value), seeded by ``seed``."""
        ds = sorted(best)
        draw = AdaptiveDBanditSchedule._joint_draw(gp, [best[d][0] for d in ds], seed)
        return {d: float(v) for d, v in zip(ds, draw)}

    @staticmethod
    def _joint_draw(gp: BanditGP, arms: list[Tensor], seed: int) -> Tensor:
        """One joint draw of the arm effect from the GP's posterior at normalised ``arms`` (each of
        its own length, at the prediction time ``t = 1``), seeded by ``seed``: ``(len(arms),)``."""
        mean, cov = arm_effect_posterior(gp, arms)
        with torch.no_grad():
            normal = torch.randn(len(arms), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
            return mean + psd_safe_cholesky(cov) @ normal.to(cov)

    def _simplify(self, gp: BanditGP, kappa: float, x: Tensor, value: float, floor: float
                  ) -> tuple[Tensor, float, int]:
        """Drop points of the maximiser ``x`` (normalised; GP-UCB ``value``) one at a time, each time
        the one whose loss costs the least GP-UCB, while the value stays at or above ``floor`` and
        ``d >= d_min``. Returns the arm, its value and the number of points dropped."""
        dropped = 0
        while x.numel() + 1 > self.d_min:
            keep = ~torch.eye(x.numel(), dtype=torch.bool, device=x.device)
            candidates = x.expand(x.numel(), -1)[keep].reshape(x.numel(), x.numel() - 1)
            t = torch.ones(x.numel(), 1, 1, dtype=x.dtype, device=x.device)
            with torch.no_grad():
                values = GPUCB(PaddedArms(gp, x.numel() - 1), kappa)(torch.cat([candidates.unsqueeze(-2), t], -1))
            k = int(torch.argmax(values))
            if float(values[k]) < floor:
                break
            x, value, dropped = candidates[k], float(values[k]), dropped + 1
        return x, value, dropped

    def _gp(self) -> BanditGP:
        """The GP of the module docstring (the step-function kernel in place of the sorted one)."""
        prior = None
        if self.fit == "map":  # the package's dimension-scaled prior, for a domain of the embedding's diameter
            prior = LogNormalPrior(math.sqrt(2) + math.log(EMBEDDING_DIAMETER), math.sqrt(3))
        kernel = StepFunctionKernel(self.lo, self.hi, lengthscale_prior=prior)
        return BanditGP(self.n_arm, time_varying=self.time_varying, hyperparameters=self._hp,
                        priors=self.fit == "map", trend=self.trend, spatial=kernel, device=self.device)

    def fit_bounds(self) -> dict[str, tuple[float, float]]:
        """Bounds of the ML fit: the protocol's (``ml_bounds``) for a domain of diameter 1, the length
        scale stretched to the embedding's diameter (:data:`EMBEDDING_DIAMETER`), noise up to :data:`NOISE_UPPER`.

        Example:
            >>> bounds = AdaptiveDBanditSchedule(5, device="cpu").fit_bounds()
            >>> bounds["lengthscale"], bounds["noise"]
            ((0.05, 0.5), (0.0001, 1.0))
        """
        bounds = ml_bounds(self.ml_bounds, 1)
        lo, hi = bounds["lengthscale"]
        return {**bounds, "lengthscale": (round(lo * EMBEDDING_DIAMETER, 12), round(hi * EMBEDDING_DIAMETER, 12)),
                "noise": (bounds["noise"][0], NOISE_UPPER)}

    def _maximise(self, gp: BanditGP, kappa: float, seed: int) -> dict[int, tuple[Tensor, float]]:
        """The best arm found and its GP-UCB value for each ``d`` (normalised units, ``d - 1`` points).

        One budget for all ``d``: ``raw_samples`` uniform arms of each ``d``'s domain (default
        :func:`~tvolib.bandit.acquisition.acquisition_budget` of its ``d - 1`` points) are scored
        by GP-UCB; the ``num_restarts`` best of all (default the budget of ``d_max - 1`` points)
        start L-BFGS-B (:func:`~tvolib.bandit.acquisition.maximize_ucb`) in their ``d``'s domain;
        a ``d`` whose samples start no restart keeps its best sample."""
        generator = torch.Generator().manual_seed(seed)
        X = gp._require_data()[0]
        best: dict[int, tuple[Tensor, float]] = {}
        screened: list[tuple[float, int, Tensor]] = []
        for d in range(self.d_min, self.d_max + 1):
            view, upper = PaddedArms(gp, d - 1), self._normalised_upper(d).to(X)
            n_raw = self.raw_samples or acquisition_budget(d - 1)[0]
            arms = torch.rand(n_raw, d - 1, generator=generator, dtype=torch.float64).to(X) * upper
            with torch.no_grad():
                values = GPUCB(view, kappa)(torch.cat([arms, torch.ones_like(arms[:, :1])], -1).unsqueeze(-2))
            k = int(torch.argmax(values))
            best[d] = (arms[k], float(values[k]))
            screened += [(float(v), d, a) for v, a in zip(values, arms)]
        n_starts = min(self.num_restarts or acquisition_budget(self.n_arm)[1], len(screened))
        starts = sorted(screened, key=lambda item: -item[0])[:n_starts]
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        for d in sorted({d for _, d, _ in starts}):
            initial = torch.stack([a for _, k, a in starts if k == d])
            with torch.random.fork_rng(devices=devices):  # BoTorch's randomness: seeded, global RNG untouched
                torch.manual_seed(seed + d)
                x, value = maximize_ucb(PaddedArms(gp, d - 1), t_norm=1.0, kappa=kappa, seed=seed + d,
                                        maxiter=self.acq_maxiter, upper=self._normalised_upper(d), initial=initial)
            if value > best[d][1]:
                best[d] = (x, value)
        return best

    def _maximise_each(self, gp: BanditGP, kappa: float, seed: int) -> dict[int, tuple[Tensor, float]]:
        """The GP-UCB maximiser and its value for each ``d``, every ``d`` searched on its own.

        Unlike :meth:`_maximise`, no ``d`` shares a budget: each has the search a bandit fixed at
        that ``d`` would run (:func:`~tvolib.bandit.acquisition.maximize_ucb` with ``raw_samples``
        and ``num_restarts``, default :func:`~tvolib.bandit.acquisition.acquisition_budget` of its
        ``d - 1`` points), seeded by ``seed + d``: under a shared budget the ``d``'s whose samples
        start no restart keep a random sample, and lose a comparison of maxima to the search.
        """
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        best: dict[int, tuple[Tensor, float]] = {}
        for d in range(self.d_min, self.d_max + 1):
            raw, restarts = acquisition_budget(d - 1)
            raw = self.raw_samples or raw
            with torch.random.fork_rng(devices=devices):  # BoTorch's randomness: seeded, global RNG untouched
                torch.manual_seed(seed + d)
                best[d] = maximize_ucb(PaddedArms(gp, d - 1), t_norm=1.0, kappa=kappa, seed=seed + d,
                                       raw_samples=raw, num_restarts=min(self.num_restarts or restarts, raw),
                                       maxiter=self.acq_maxiter, upper=self._normalised_upper(d))
        return best

    def _normalised_upper(self, d: int) -> Tensor:
        """The upper bounds of ``d``'s domain in the GP's normalised units."""
        return (torch.tensor(self._domain_upper(d), dtype=torch.float64) - self.lo) / (self.hi - self.lo)

    # ----- records and state -----------------------------------------------------------------
    def _config_row(self) -> dict[str, Any]:
        row = super()._config_row()
        row.update(d=self.d, d_min=self.d_min, d_max=self.d_max, upper=list(self._domain_upper(self.d)))
        del row["coordinate_scale"]  # the sorted kernel's; the step-function kernel has none
        return row

    def _config(self) -> dict[str, Any]:
        cfg = super()._config()
        cfg.update(d_min=self.d_min, d_choice=self.d_choice, d_tolerance=self.d_tolerance)
        return cfg
