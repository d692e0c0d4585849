"""Sampling left-most derivations under a cap, from fixed rule probabilities or a sequential policy.

A derivation is sampled top-down: the left-most pending non-terminal ``A`` is expanded by a rule
``r ~ pi(. | A, history)`` drawn by inverse CDF from a uniform ``u[k, t]`` (tree ``k``, step ``t``),
until no non-terminal is pending or the :class:`DerivationCap` stops it. The stop depends only on
the derivation so far, so ``pi`` is a proper distribution over capped derivations: a capped
derivation has the probability of its chosen rules, ``log pi(z) = sum_t log pi(r_t | ...)``.
Truncated derivations are flagged by :attr:`Derivations.complete
<tvolib.models.pcfg.derivations.Derivations.complete>`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from tvolib.models.pcfg.derivations import Derivations
from tvolib.models.pcfg.grammar import Grammar

__all__ = [
    "CAP_KINDS",
    "DEPTH_CAP_MAX_PRODUCTIONS",
    "DEFAULT_DERIVATION_CAP",
    "DerivationCap",
    "resolve_cap",
    "Policy",
    "sample_with_policy",
    "sample_from_table",
    "sample_sentences",
]

CAP_KINDS = ("productions", "depth")
#: Under a depth cap, a derivation is also stopped after this many rules (a guard that only bites
#: when the rule probabilities are super-critical, where a depth-50 tree can have ~2^50 nodes).
DEPTH_CAP_MAX_PRODUCTIONS = 10_000
_DEPTH_BLOCK = 128  # uniforms drawn per block under a depth cap

# A policy maps (current non-terminal ids, previous rule + 1, pointer), each (n,), to (n, n_rules)
# log-probabilities (zero mass outside the non-terminal's rules).
Policy = Callable[[Tensor, Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class DerivationCap:
    """When a sampled derivation stops before its tree is complete.

    * ``DerivationCap("productions", N)``: after ``N`` rule choices. The default is ``N = 127``
      (:data:`DEFAULT_DERIVATION_CAP`); a complete tree with ``n`` words of a grammar in Chomsky
      normal form needs ``2n - 1`` rules, so it admits every tree of up to 64 words.
    * ``DerivationCap("depth", D)``: the start symbol has depth 0 and the children of a node at
      depth ``d`` have depth ``d + 1``; a non-terminal is expanded only at depth ``<= D``. The
      derivation stops when its left-most pending non-terminal is deeper (the released code of
      Le et al. 2019 uses ``D = 50``; it leaves such a non-terminal as a leaf and goes on with the
      rest of the tree, which truncates exactly the same trees). A depth cap also stops after
      :data:`DEPTH_CAP_MAX_PRODUCTIONS` rules.

    The symbols still pending when a derivation stops stay unexpanded (see
    :func:`~tvolib.models.pcfg.derivations.replay_derivation`).

    Args:
        kind: ``"productions"`` or ``"depth"``.
        limit: an int ``>= 1``.

    Example:
        >>> DerivationCap.coerce(("depth", 50))
        DerivationCap(kind='depth', limit=50)
        >>> str(DEFAULT_DERIVATION_CAP)
        'productions=127'
    """

    kind: str = "productions"
    limit: int = 127

    def __post_init__(self) -> None:
        if self.kind not in CAP_KINDS:
            raise ValueError(f"DerivationCap.kind must be one of {CAP_KINDS}; got {self.kind!r}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"DerivationCap.limit must be an int >= 1; got {self.limit!r}")

    @classmethod
    def coerce(cls, value: DerivationCap | tuple[str, int] | list) -> DerivationCap:
        """A cap from itself or a ``(kind, limit)`` pair such as ``("depth", 50)``."""
        if isinstance(value, DerivationCap):
            return value
        if isinstance(value, (tuple, list)) and len(value) == 2:
            return cls(*value)
        raise ValueError(f"derivation_cap must be a DerivationCap or a (kind, limit) pair with kind in "
                         f"{CAP_KINDS}, e.g. ('productions', 127) or ('depth', 50); got {value!r}")

    @property
    def max_productions(self) -> int:
        """The most rules a derivation may have."""
        return self.limit if self.kind == "productions" else DEPTH_CAP_MAX_PRODUCTIONS

    @property
    def max_depth(self) -> int | None:
        """The deepest non-terminal that is expanded (``None``: unbounded, under a productions cap)."""
        return self.limit if self.kind == "depth" else None

    def __str__(self) -> str:
        return f"{self.kind}={self.limit}"


DEFAULT_DERIVATION_CAP = DerivationCap("productions", 127)


def resolve_cap(max_productions: int | None = None,
                derivation_cap: DerivationCap | tuple[str, int] | None = None) -> DerivationCap:
    """The cap the samplers' two arguments ask for.

    ``max_productions=N`` is shorthand for ``derivation_cap=DerivationCap("productions", N)``;
    giving neither means :data:`DEFAULT_DERIVATION_CAP`.

    Args:
        max_productions: an int ``>= 1`` or ``None``.
        derivation_cap: a :class:`DerivationCap`, a ``(kind, limit)`` pair, or ``None``.

    Returns:
        The :class:`DerivationCap`.

    Raises:
        ValueError: if both are given or either is invalid.
    """
    if max_productions is not None and derivation_cap is not None:
        raise ValueError(f"give max_productions or derivation_cap, not both; got {max_productions!r} and "
                         f"{derivation_cap!r}")
    if derivation_cap is not None:
        return DerivationCap.coerce(derivation_cap)
    if max_productions is None:
        return DEFAULT_DERIVATION_CAP
    if isinstance(max_productions, bool) or not isinstance(max_productions, int) or max_productions < 1:
        raise ValueError(f"max_productions must be an int >= 1; got {max_productions!r}")
    return DerivationCap("productions", max_productions)


class _Uniforms:
    """The uniforms ``u[k, t]``, drawn from ``generator`` in blocks of shape ``(n, width)``.

    Under a productions cap one block of width ``limit`` is drawn up front, so the stream consumed
    does not depend on the trees. Under a depth cap blocks of width 128 are drawn in order when a
    step first needs them.
    """

    def __init__(self, n: int, cap: DerivationCap, generator: torch.Generator, device: torch.device) -> None:
        self.n, self.generator, self.device = n, generator, device
        self.width = cap.limit if cap.kind == "productions" else _DEPTH_BLOCK
        self.blocks: list[Tensor] = []
        self.lists: list[list[list[float]]] = []
        self.block(0)

    def block(self, b: int) -> Tensor:
        """Block ``b``: the uniforms of steps ``b * width ... (b + 1) * width - 1``."""
        while len(self.blocks) <= b:
            self.blocks.append(torch.rand(self.n, self.width, generator=self.generator, device=self.device))
        return self.blocks[b]

    def column(self, t: int) -> Tensor:
        """``u[:, t]``, shape ``(n,)``."""
        return self.block(t // self.width)[:, t % self.width]

    def row_block(self, k: int, b: int) -> list[float]:
        """``u[k, b * width: (b + 1) * width]`` as Python floats."""
        while len(self.lists) <= b:
            self.lists.append(self.block(len(self.lists)).cpu().tolist())
        return self.lists[b][k]


def _expand(grammar: Grammar, stack: list[int], depths: list[int] | None, r: int) -> int:
    """Replace the left-most pending non-terminal (top of ``stack``) by rule ``r``'s right-hand side.

    The terminals that reach the top are emitted; returns their number. ``depths`` (``None``
    when no depth is capped) runs parallel to ``stack``: the children get the parent's depth + 1.
    """
    stack.pop()
    rhs = grammar.rule_rhs[r]
    stack.extend(rhs[::-1])
    if depths is not None:
        depths.extend([depths.pop() + 1] * len(rhs))
    emitted = 0
    while stack and stack[-1] >= grammar.n_nonterminals:
        stack.pop()
        emitted += 1
    if depths is not None:
        del depths[len(stack):]
    return emitted


def _inverse_cdf(probs: Tensor, u: Tensor, last_rule: Tensor) -> Tensor:
    """Categorical draws by inverse CDF: the first index whose cumulative probability reaches ``u``.

    ``probs`` ``(n, R)`` is zero outside each row's allowed rules, so the first index reached has
    positive mass; ``last_rule`` (the row's last allowed index) guards against rounding of the sum.
    A draw ``u = 0`` (which ``torch.rand`` can return) takes the first index of positive mass, never
    a zero-mass index before it (``cumsum <= 0`` counts those; for ``u > 0`` it adds nothing).
    """
    cumulative = probs.cumsum(dim=1)
    idx = ((cumulative < u[:, None]) | (cumulative <= 0)).sum(dim=1)
    return torch.minimum(idx, last_rule)


def sample_with_policy(grammar: Grammar, n: int, policy: Policy, generator: torch.Generator,
                       cap: DerivationCap | int, device: torch.device) -> tuple[list[tuple[int, ...]], Tensor]:
    """Sample ``n`` left-most derivations in lock step (one batched policy call per step).

    Step ``t`` of tree ``k`` uses ``u[k, t]`` (see :class:`_Uniforms`) by inverse CDF. Stack
    bookkeeping is plain Python (the grammar is tiny; the batched network call dominates).

    Args:
        grammar: the grammar.
        n: number of derivations.
        policy: maps the current non-terminals, previous rules + 1 and pointers (each ``(n,)``)
            to ``(n, n_rules)`` rule log-probabilities; called once per step for all rows.
        generator: the source of the uniforms (on ``device``).
        cap: a :class:`DerivationCap`, or an int (a productions cap).
        device: where the policy's inputs go.

    Returns:
        The rule tuples and the float64 sum of the chosen rules' log-probabilities as the sampler
        saw them.
    """
    cap = cap if isinstance(cap, DerivationCap) else resolve_cap(max_productions=cap)
    uniforms = _Uniforms(n, cap, generator, device)
    last_rule = torch.tensor([rs[-1] for rs in grammar.rules_of], device=device)
    stacks = [[grammar.start_id] for _ in range(n)]
    max_depth = cap.max_depth
    depths = [None if max_depth is None else [0] for _ in range(n)]
    rules: list[list[int]] = [[] for _ in range(n)]
    emitted = [0] * n
    prev = [0] * n
    total = torch.zeros(n, dtype=torch.float64, device=device)
    for t in range(cap.max_productions):
        alive = [bool(stacks[k]) and (max_depth is None or depths[k][-1] <= max_depth) for k in range(n)]
        active = [k for k in range(n) if alive[k]]
        if not active:
            break
        nt = torch.tensor([stacks[k][-1] if stacks[k] else 0 for k in range(n)], device=device)
        logp = policy(nt, torch.tensor(prev, device=device), torch.tensor(emitted, device=device))
        choice = _inverse_cdf(logp.exp(), uniforms.column(t), last_rule[nt])
        chosen_logp = logp.gather(1, choice[:, None]).squeeze(1).double()
        total += torch.where(torch.tensor(alive, device=device), chosen_logp, 0.0)
        chosen = choice.tolist()
        for k in active:
            emitted[k] += _expand(grammar, stacks[k], depths[k], chosen[k])
            rules[k].append(chosen[k])
            prev[k] = chosen[k] + 1
    return [tuple(r) for r in rules], total


def _sample_prior(grammar: Grammar, table: Tensor, n: int, generator: torch.Generator,
                  cap: DerivationCap) -> list[tuple[int, ...]]:
    """Capped derivations from fixed rule probabilities, one tree at a time in plain Python.

    Same randomness as :func:`sample_with_policy` (inverse CDF of ``u[k, t]``) but without a per-step
    tensor call, which makes it much faster for trees of very different sizes.
    """
    probs = table.detach().double().exp().cpu()
    cdfs = [[(r, c) for r, c in zip(rs, probs[a, list(rs)].cumsum(0).tolist())] for a, rs in enumerate(grammar.rules_of)]
    uniforms = _Uniforms(n, cap, generator, table.device)
    max_depth, width = cap.max_depth, uniforms.width
    out: list[tuple[int, ...]] = []
    for k in range(n):
        stack, chosen = [grammar.start_id], []
        depths = None if max_depth is None else [0]
        for t in range(cap.max_productions):
            if t % width == 0:
                u = uniforms.row_block(k, t // width)
            if max_depth is not None and depths[-1] > max_depth:
                break
            cdf = cdfs[stack[-1]]
            r = next((rule for rule, c in cdf if c >= u[t % width]), cdf[-1][0])
            chosen.append(r)
            _expand(grammar, stack, depths, r)
            if not stack:
                break
        out.append(tuple(chosen))
    return out


def sample_from_table(grammar: Grammar, table: Tensor, n: int, generator: torch.Generator,
                      max_productions: int | None = None, *,
                      derivation_cap: DerivationCap | tuple[str, int] | None = None) -> Derivations:
    """``n`` capped derivations from fixed rule log-probabilities.

    Args:
        grammar: the grammar.
        table: ``(n_nonterminals, n_rules)`` rule log-probabilities, ``-inf`` outside each
            non-terminal's rules (:meth:`PCFGModel.log_prob_table
            <tvolib.models.pcfg.networks.PCFGModel.log_prob_table>`).
        n: number of derivations.
        generator: the source of the uniforms (on ``table``'s device).
        max_productions, derivation_cap: the cap, see :func:`resolve_cap`.

    Returns:
        The :class:`~tvolib.models.pcfg.derivations.Derivations` on ``table``'s device.

    Example:
        >>> from tvolib.models.pcfg import PCFGModel, load_grammar
        >>> g = load_grammar("astronomers")
        >>> table = PCFGModel(g, init="true").log_prob_table().detach()
        >>> d = sample_from_table(g, table, 4, torch.Generator().manual_seed(0), derivation_cap=("depth", 50))
        >>> len(d), d.complete.dtype
        (4, torch.bool)
    """
    cap = resolve_cap(max_productions, derivation_cap)
    return Derivations.build(grammar, _sample_prior(grammar, table, n, generator, cap), table.device)


def sample_sentences(grammar: Grammar, table: Tensor, n: int, generator: torch.Generator, *,
                     max_words: int, max_productions: int | None = None,
                     derivation_cap: DerivationCap | tuple[str, int] | None = None,
                     batch: int = 256, max_tries: int = 1000) -> list[tuple[int, ...]]:
    """``n`` sentences from the PCFG ``table`` conditioned on a complete tree with ``<= max_words`` words.

    Rejection sampling in batches of ``batch`` derivations (:func:`sample_from_table`).

    Args:
        grammar, table, generator: as for :func:`sample_from_table`.
        n: number of sentences.
        max_words: the longest sentence accepted.
        max_productions, derivation_cap: the cap, see :func:`resolve_cap`.
        batch: derivations per batch.
        max_tries: batches before giving up.

    Returns:
        ``n`` sentences as terminal-id tuples, in the order accepted.

    Raises:
        RuntimeError: if fewer than ``n`` are accepted in ``max_tries`` batches.
    """
    cap = resolve_cap(max_productions, derivation_cap)
    out: list[tuple[int, ...]] = []
    for _ in range(max_tries):
        d = sample_from_table(grammar, table, batch, generator, derivation_cap=cap)
        for words, ok in zip(d.yields_list, d.complete.tolist()):
            if ok and len(words) <= max_words:
                out.append(words)
                if len(out) == n:
                    return out
    raise RuntimeError(f"accepted only {len(out)} of {n} sentences with <= {max_words} words "
                       f"within the cap {cap} after {max_tries * batch} draws")
