"""Exact reference levels of the PCFG rule KL (Fig. 6): both KL directions, the uniform-theta level
and the floor of the length-cut maximum-likelihood theta.

The Fig. 6 model metric is the rule KL averaged over the grammar's non-terminals ``N``,

    ``KL_paper = (1/|N|) sum_A KL(p_theta(. | A) || p_true(. | A))``     (the paper's axis label),
    ``KL_le2019 = (1/|N|) sum_A KL(p_true(. | A) || p_theta(. | A))``    (Le et al. 2019's code),

where non-terminals with a single rule contribute 0. Two levels make the curves readable:

* :func:`uniform_level`: the KL of the uniform theta (every rule of ``A`` has probability
  ``1 / #rules(A)``), the value at initialisation for ``theta_init="uniform"``.
* :func:`length_cut_ml_floor`: the KL of the maximum-likelihood theta for infinitely many training
  sentences drawn from the true grammar conditioned on at most ``max_words`` words (the training
  data's distribution ``D_L``). The model does not know about the cut, so even this theta is biased
  (recursive rules lose probability): with more and more such data, training approaches this theta,
  not the true grammar.

Two maximum-likelihood thetas are computed exactly. The complete-data one (``data="trees"``, the
default of :func:`length_cut_ml_floor`) maximises ``E_{z ~ p_true(z | <= L words)} log p_theta(z)``:
the normalised expected rule counts of the length-cut *tree* distribution, a dynamic programme over
(non-terminal, number of words) that needs no enumeration (any ``L`` in milliseconds). The
sentence-level one (``data="sentences"``) maximises ``E_{x ~ D_L} log p_theta(x)`` (``p_theta(x)``
sums over the parses of ``x``), the infinite-data limit of training on sentences with exact
posteriors; it is computed on the exactly enumerated length-cut language (expected counts by
inside-outside, an EM fixed point at convergence), which limits ``L`` to about 15-20 words for
Astronomers. The two differ when sentences are ambiguous (the sentence ML weighs the parses of ``x``
by ``p_theta``, the tree ML by ``p_true``); for Astronomers the floors are close (``L = 15``:
0.00688 sentences, 0.00703 trees).

Both require a grammar in Chomsky normal form (every rule ``A -> B C`` or ``A -> word``), such as the
Astronomers grammar; a complete tree with ``n`` words then has ``2n - 1`` productions, so the
derivation budget ``max_productions >= 2 L - 1`` of the training configuration never binds.
"""
from __future__ import annotations

import math
import torch
from torch import Tensor

from tvolib.models.pcfg import Grammar

__all__ = [
    "KL_DIRECTIONS",
    "rule_kl",
    "mean_rule_kl",
    "uniform_log_probs",
    "uniform_level",
    "length_cut_tree_ml",
    "LumpedGrammar",
    "length_cut_sentences",
    "length_cut_ml",
    "length_cut_ml_floor",
]

#: ``"paper"``: KL(p_theta || p_true); ``"le2019"``: KL(p_true || p_theta).
KL_DIRECTIONS: tuple[str, ...] = ("paper", "le2019")
_DATA: tuple[str, ...] = ("sentences", "trees")


# --------------------------------------------------------------------------------------------
# Rule KLs
# --------------------------------------------------------------------------------------------


def _check_direction(direction: str) -> None:
    if direction not in KL_DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not accepted; choose one of {list(KL_DIRECTIONS)}")


def rule_kl(grammar: Grammar, log_p_theta: Tensor, log_p_true: Tensor, direction: str = "paper") -> Tensor:
    """Per non-terminal rule KL, ``(n_nonterminals,)`` float64.

    ``"paper"``: ``KL_A = sum_{r: A -> .} p_theta(r) (log p_theta(r) - log p_true(r))``;
    ``"le2019"``: the same with ``p_theta`` and ``p_true`` swapped. Rules of probability 0 in the
    first distribution contribute 0 (``0 log 0 = 0``).

    Args:
        grammar: the grammar whose ``rule_lhs`` groups the rules.
        log_p_theta: ``(n_rules,)`` log-probabilities of the learned rules given their left-hand side.
        log_p_true: ``(n_rules,)`` log-probabilities of the true rules.
        direction: ``"paper"`` or ``"le2019"``.

    Returns:
        ``(n_nonterminals,)`` float64 tensor; single-rule non-terminals get 0.

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> g = load_grammar("astronomers")
        >>> # VP: 0.5 log(0.5 / 0.7) + 0.5 log(0.5 / 0.3)
        >>> rule_kl(g, uniform_log_probs(g), g.true_log_probs())[g.nt_index["VP"]]
        tensor(0.0872, dtype=torch.float64)
    """
    _check_direction(direction)
    lt, lp = log_p_theta.detach().double().cpu(), log_p_true.detach().double().cpu()
    for name, value in (("log_p_theta", lt), ("log_p_true", lp)):
        if value.shape != (grammar.n_rules,):
            raise ValueError(f"{name} must have shape ({grammar.n_rules},) (one entry per rule); "
                             f"got {tuple(value.shape)}")
    first, second = (lt, lp) if direction == "paper" else (lp, lt)
    p = first.exp()
    terms = torch.where(p > 0, p * (first - second), torch.zeros_like(p))
    return torch.zeros(grammar.n_nonterminals, dtype=torch.float64).index_add_(0, torch.tensor(grammar.rule_lhs), terms)


def mean_rule_kl(grammar: Grammar, log_p_theta: Tensor, log_p_true: Tensor, direction: str = "paper") -> float:
    """Fig. 6's ``kl_p``: :func:`rule_kl` averaged over all non-terminals (single-rule ones count as 0).

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> g = load_grammar("astronomers")
        >>> round(mean_rule_kl(g, uniform_log_probs(g), g.true_log_probs()), 4)
        0.054
    """
    return float(rule_kl(grammar, log_p_theta, log_p_true, direction).mean())


def uniform_log_probs(grammar: Grammar) -> Tensor:
    """``(n_rules,)`` float64: ``-log #rules(A)`` for every rule of ``A`` (all logits equal)."""
    sizes = torch.tensor([len(grammar.rules_of[a]) for a in grammar.rule_lhs], dtype=torch.float64)
    return -sizes.log()


def uniform_level(grammar: Grammar, direction: str = "paper") -> float:
    """Mean rule KL of the uniform theta: the value at initialisation for ``theta_init="uniform"``.

    ``(1/|N|) sum_A KL(u_A || p_true(. | A))`` (``"paper"``) or ``KL(p_true(. | A) || u_A)``
    (``"le2019"``) with ``u_A`` uniform over the rules of ``A``.

    Args:
        grammar: the true grammar.
        direction: ``"paper"`` or ``"le2019"``.

    Returns:
        The level as a float (Astronomers: 0.05396 paper, 0.05015 le2019).

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> round(uniform_level(load_grammar("astronomers"), "le2019"), 4)
        0.0502
    """
    return mean_rule_kl(grammar, uniform_log_probs(grammar), grammar.true_log_probs(), direction)


# --------------------------------------------------------------------------------------------
# Chomsky normal form and inside probabilities
# --------------------------------------------------------------------------------------------


def _cnf(grammar: Grammar) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, int]]]:
    """Binary rules ``(r, A, B, C)`` and word rules ``(r, A, word)``; raises unless the grammar is CNF."""
    n_nt = grammar.n_nonterminals
    binary, lexical = [], []
    for r, (a, rhs) in enumerate(zip(grammar.rule_lhs, grammar.rule_rhs)):
        if len(rhs) == 2 and all(s < n_nt for s in rhs):
            binary.append((r, a, rhs[0], rhs[1]))
        elif len(rhs) == 1 and rhs[0] >= n_nt:
            lexical.append((r, a, rhs[0] - n_nt))
        else:
            raise ValueError(f"grammar {grammar.name!r}: rule {grammar.rules[r][0]} -> {' '.join(grammar.rules[r][1])} "
                             f"is not in Chomsky normal form (A -> B C or A -> word), which the length-cut levels need")
    return binary, lexical


def _check_max_words(max_words: int) -> None:
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words={max_words!r} is not accepted; it must be an integer >= 1")


def _length_inside(grammar: Grammar, probs: Tensor, max_words: int) -> Tensor:
    """``I[A, n]`` = total probability of the trees rooted at ``A`` with exactly ``n`` words, ``n = 0..L``.

    ``I[A, 1] = sum_{A -> w} p``, ``I[A, n] = sum_{A -> B C} p sum_{d=1}^{n-1} I[B, d] I[C, n - d]``
    (differentiable in ``probs``).
    """
    binary, lexical = _cnf(grammar)
    n_nt = grammar.n_nonterminals
    cols = [torch.zeros(n_nt, dtype=probs.dtype)]
    cols.append(torch.zeros(n_nt, dtype=probs.dtype).index_add(0, torch.tensor([a for _, a, _ in lexical]),
                                                               probs[[r for r, _, _ in lexical]]))
    for n in range(2, max_words + 1):
        left = torch.stack(cols[1:n], dim=1)  # d = 1..n-1
        right = torch.stack(cols[n - 1:0:-1], dim=1)  # n - d
        terms = [probs[r] * (left[b] * right[c]).sum() for r, _, b, c in binary]
        cols.append(torch.zeros(n_nt, dtype=probs.dtype).index_add(
            0, torch.tensor([a for _, a, _, _ in binary]), torch.stack(terms)) if binary else cols[0])
    return torch.stack(cols, dim=1)


def length_cut_tree_ml(grammar: Grammar, max_words: int) -> Tensor:
    """Complete-data ML theta: the normalised expected rule counts of ``p_true(z | z has <= L words)``.

    With ``Z_L(p) = sum_{n <= L} I[start, n]`` (:func:`_length_inside`), the expected count of rule
    ``r`` is ``p_r d log Z_L / d p_r`` (the inside-outside identity, here by autograd over the
    length chart); ``theta_r = E[n_r] / sum_{r' of A} E[n_r']``. A non-terminal never expanded in
    such trees keeps its true probabilities.

    Args:
        grammar: a grammar in Chomsky normal form.
        max_words: the length cut ``L``.

    Returns:
        ``(n_rules,)`` float64 log-probabilities.

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> theta = length_cut_tree_ml(load_grammar("astronomers"), 15).exp()  # NP -> NP PP is rule 1
    """
    _check_max_words(max_words)
    probs = torch.tensor(grammar.true_probs, dtype=torch.float64, requires_grad=True)
    inside = _length_inside(grammar, probs, max_words)
    (grad,) = torch.autograd.grad(inside[grammar.start_id, 1:].sum().log(), probs)
    return _normalise_counts(grammar, (grad * probs).detach())


def _normalise_counts(grammar: Grammar, counts: Tensor) -> Tensor:
    """Per-non-terminal normalisation of expected rule counts into log-probabilities (true rules where all are 0)."""
    lhs = torch.tensor(grammar.rule_lhs)
    totals = torch.zeros(grammar.n_nonterminals, dtype=torch.float64).index_add(0, lhs, counts)[lhs]
    true = torch.tensor(grammar.true_probs, dtype=torch.float64)
    return torch.where(totals > 0, counts / totals.clamp_min(1e-300), true).log()


# --------------------------------------------------------------------------------------------
# The length-cut language and the sentence-level maximum-likelihood theta
# --------------------------------------------------------------------------------------------


class LumpedGrammar:
    """The CNF grammar with interchangeable words merged into one token per non-terminal.

    A word that occurs in a single rule ``A -> w`` is interchangeable with every other such word of
    ``A``: swapping them changes neither the parses of a sentence nor their posterior, and
    ``log p_theta(x) = log p_theta'(x') + sum_{lumped positions} log(theta(A -> w) / theta(A -> class))``,
    whose second term the data maximise at the true ratios. So the sentence ML is computed on the
    lumped grammar (token per class, rule ``A -> class`` of probability ``sum_w p(A -> w)``) and mapped
    back with the true within-class ratios. ``groups[k]`` lists the original rules of lumped rule ``k``.
    """

    def __init__(self, grammar: Grammar) -> None:
        binary, lexical = _cnf(grammar)
        uses = [0] * grammar.n_terminals
        for _, _, w in lexical:
            uses[w] += 1
        tokens: dict[tuple, int] = {}
        groups: dict[tuple, list[int]] = {}
        for r, a, w in lexical:
            key = ("class", a) if uses[w] == 1 else ("word", w)
            tokens.setdefault(key, len(tokens))
            groups.setdefault((a, tokens[key]), []).append(r)
        self.grammar = grammar
        self.binary = [(a, b, c) for _, a, b, c in binary]
        self.lexical = list(groups)  # (A, token)
        self.groups = [[r] for r, _, _, _ in binary] + list(groups.values())
        self.lhs = torch.tensor([a for a, _, _ in self.binary] + [a for a, _ in self.lexical])
        self.n_tokens = len(tokens)
        true = torch.tensor(grammar.true_probs, dtype=torch.float64)
        self.true_probs = torch.stack([true[g].sum() for g in self.groups])

    def expand(self, lumped_probs: Tensor) -> Tensor:
        """Original ``(n_rules,)`` probabilities: each lumped rule's mass split in the true ratios."""
        true = torch.tensor(self.grammar.true_probs, dtype=torch.float64)
        out = torch.empty_like(true)
        for k, group in enumerate(self.groups):
            out[group] = lumped_probs[k] * true[group] / true[group].sum()
        return out

    def normalise(self, counts: Tensor) -> Tensor:
        totals = torch.zeros(self.grammar.n_nonterminals, dtype=torch.float64).index_add(0, self.lhs, counts)[self.lhs]
        return torch.where(totals > 0, counts / totals.clamp_min(1e-300), self.true_probs)

    def log_inside(self, probs: Tensor, sentences: Tensor) -> Tensor:
        """``log p(x)`` of equal-length token rows ``(m, n)`` by the CKY inside algorithm (differentiable)."""
        n_nt = self.grammar.n_nonterminals
        n_bin = len(self.binary)
        lex = torch.zeros(n_nt, self.n_tokens, dtype=torch.float64).index_put(
            (torch.tensor([a for a, _ in self.lexical]), torch.tensor([t for _, t in self.lexical])), probs[n_bin:],
            accumulate=True)
        rules = torch.zeros(n_nt, n_nt, n_nt, dtype=torch.float64)
        if n_bin:
            index = torch.tensor(self.binary).T
            rules = rules.index_put((index[0], index[1], index[2]), probs[:n_bin], accumulate=True)
        n = sentences.shape[1]
        chart = {1: lex[:, sentences].permute(1, 2, 0)}  # width -> (m, n - width + 1, n_nt)
        for w in range(2, n + 1):
            span = n - w + 1
            chart[w] = sum(torch.einsum("mib,mic,abc->mia", chart[d][:, :span], chart[w - d][:, d: d + span], rules)
                           for d in range(1, w))
        return chart[n][:, 0, self.grammar.start_id].log()


def _yields(lumped: LumpedGrammar, max_words: int, max_sentences: int) -> dict[int, set[tuple[int, ...]]]:
    """Distinct lumped yields of the start symbol by length, ``n = 1..L`` (raises beyond ``max_sentences``)."""
    n_nt = lumped.grammar.n_nonterminals
    table = [[set() for _ in range(max_words + 1)] for _ in range(n_nt)]
    for a, t in lumped.lexical:
        table[a][1].add((t,))
    for n in range(2, max_words + 1):
        for a, b, c in lumped.binary:
            for d in range(1, n):
                table[a][n].update(y + z for y in table[b][d] for z in table[c][n - d])
        total = sum(len(table[a][n]) for a in range(n_nt))
        if total > max_sentences:
            raise ValueError(f"the length-cut language of {lumped.grammar.name!r} has more than max_sentences="
                             f"{max_sentences} distinct {n}-word yields; lower max_words or use data='trees'")
    start = lumped.grammar.start_id
    return {n: table[start][n] for n in range(1, max_words + 1) if table[start][n]}


def length_cut_sentences(grammar: Grammar, max_words: int, max_sentences: int = 200_000
                         ) -> tuple[LumpedGrammar, list[tuple[Tensor, Tensor]]]:
    """The length-cut language: per length, the distinct (lumped) sentences and their weights under ``D_L``.

    ``D_L(x) = p_true(x) / sum_{|x'| <= L} p_true(x')`` with ``p_true(x)`` the inside probability.

    Returns:
        The lumped grammar and a list of ``(tokens (m, n), weights (m,))``, one entry per length;
        the weights over all entries sum to 1.
    """
    _check_max_words(max_words)
    lumped = LumpedGrammar(grammar)
    batches = []
    for n, ys in sorted(_yields(lumped, max_words, max_sentences).items()):
        tokens = torch.tensor(sorted(ys))
        batches.append((tokens, lumped.log_inside(lumped.true_probs, tokens).exp()))
    total = sum(float(w.sum()) for _, w in batches)
    return lumped, [(tokens, w / total) for tokens, w in batches]


def _expected_counts(lumped: LumpedGrammar, batches: list[tuple[Tensor, Tensor]], probs: Tensor) -> Tensor:
    """``c_r = E_{x ~ D_L} E_theta[n_r(z) | x] = theta_r d/dtheta_r E_{x ~ D_L} log p_theta(x)`` (lumped rules)."""
    p = probs.detach().clone().requires_grad_(True)
    objective = sum((w * lumped.log_inside(p, tokens)).sum() for tokens, w in batches)
    (grad,) = torch.autograd.grad(objective, p)
    return grad * p.detach()


def _maximise(lumped: LumpedGrammar, batches: list[tuple[Tensor, Tensor]], start: Tensor, free: Tensor) -> Tensor:
    """L-BFGS on per-non-terminal softmax logits of the ``free`` rules (the others have probability 0)."""
    logits = torch.where(free, start.clamp_min(1e-300).log(), torch.zeros_like(start)).requires_grad_(True)
    lhs = lumped.lhs

    n_nt = lumped.grammar.n_nonterminals
    has_free = torch.zeros(n_nt, dtype=torch.bool).index_put((lhs,), free, accumulate=True)[lhs]

    def probs_of(z: Tensor) -> Tensor:  # softmax per non-terminal over its free rules; unused ones keep ``start``
        z = z.masked_fill(~free, -math.inf)
        peak = torch.full((n_nt,), -math.inf, dtype=z.dtype).scatter_reduce(
            0, lhs, z, reduce="amax")[lhs]
        e = torch.where(free, (z - peak.where(has_free, torch.zeros_like(peak))).exp(), torch.zeros_like(z))
        total = torch.zeros_like(z).index_add(0, lhs, e)[lhs]
        return torch.where(has_free, e / total.where(has_free, torch.ones_like(total)), start)

    optimiser = torch.optim.LBFGS([logits], lr=1.0, max_iter=500, tolerance_grad=1e-13, tolerance_change=1e-16,
                                  history_size=20, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimiser.zero_grad()
        p = probs_of(logits)
        loss = -sum((w * lumped.log_inside(p, tokens)).sum() for tokens, w in batches)
        loss.backward()
        return loss

    optimiser.step(closure)
    return probs_of(logits.detach())


def length_cut_ml(grammar: Grammar, max_words: int, *, tol: float = 1e-9, max_iter: int = 1000,
                  max_sentences: int = 200_000) -> Tensor:
    """Sentence-level ML theta of the length-cut data: ``argmax_theta E_{x ~ D_L} log p_theta(x)``.

    The objective is evaluated exactly (inside probabilities by CKY over every sentence of
    :func:`length_cut_sentences`) and maximised by L-BFGS over softmax logits, started from the
    complete-data theta :func:`length_cut_tree_ml`; rules that no parse of any sentence uses get
    probability 0. The result is then iterated with EM,
    ``theta_r <- c_r / sum_{r' of A} c_r'`` with exact expected counts
    ``c_r = E_{x ~ D_L} E_theta[n_r(z) | x] = theta_r d/dtheta_r E_{x ~ D_L} log p_theta(x)``
    (inside-outside by autograd), until no probability moves by more than ``tol``: the returned
    theta is a fixed point of EM, i.e. a stationary point of the likelihood.

    Args:
        grammar: a grammar in Chomsky normal form.
        max_words: the length cut ``L``.
        tol: convergence tolerance on the rule probabilities (EM step).
        max_iter: EM iterations after L-BFGS before giving up (raises ``RuntimeError``).
        max_sentences: bound on the enumerated language (raises ``ValueError`` beyond).

    Returns:
        ``(n_rules,)`` float64 log-probabilities.

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> g = load_grammar("astronomers")
        >>> theta = length_cut_ml(g, 9).exp()
        >>> round(float(theta[g.rules.index(("NP", ("NP", "PP")))]), 4)
        0.1934
    """
    lumped, batches = length_cut_sentences(grammar, max_words, max_sentences)
    tree = length_cut_tree_ml(grammar, max_words).exp()
    start = torch.stack([tree[g].sum() for g in lumped.groups])
    free = _expected_counts(lumped, batches, lumped.true_probs) > 0
    probs = _maximise(lumped, batches, lumped.normalise(torch.where(free, start, torch.zeros_like(start))), free)
    for _ in range(max_iter):
        new = lumped.normalise(_expected_counts(lumped, batches, probs))
        step = float((new - probs).abs().max())
        probs = new
        if step <= tol:
            return lumped.expand(probs).log()
    raise RuntimeError(f"EM did not converge to tol={tol} in max_iter={max_iter} iterations (last step {step:.2e})")


def length_cut_ml_floor(grammar: Grammar, max_words: int, direction: str = "paper", *, data: str = "trees") -> float:
    """Mean rule KL (:func:`mean_rule_kl`) of the length-cut ML theta to the true grammar.

    Args:
        grammar: the true grammar (Chomsky normal form).
        max_words: the training sentences' length cut ``L``.
        direction: ``"paper"`` or ``"le2019"``.
        data: ``"trees"`` (:func:`length_cut_tree_ml`: complete data, exact for any ``L`` in
            milliseconds) or ``"sentences"`` (:func:`length_cut_ml`: the ML of training on sentences,
            exact but enumerating the language, so limited to ``L`` of about 15-20 words; Astronomers
            at ``L = 15``: 0.00688 against 0.00703 for trees).

    Returns:
        The floor as a float.

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> round(length_cut_ml_floor(load_grammar("astronomers"), 15), 4)
        0.007
    """
    _check_direction(direction)
    if data not in _DATA:
        raise ValueError(f"data={data!r} is not accepted; choose one of {list(_DATA)}")
    theta = length_cut_ml(grammar, max_words) if data == "sentences" else length_cut_tree_ml(grammar, max_words)
    return mean_rule_kl(grammar, theta, grammar.true_log_probs(), direction)
