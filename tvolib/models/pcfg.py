"""The probabilistic context-free grammar model of the paper's Appendix D.1 (Fig. 6).

Following Le et al. (2019, "Revisiting Reweighted Wake-Sleep", Section 4.1):

* **Grammar** (:class:`Grammar`, :func:`load_grammar`): non-terminals with weighted rules
  ``A -> s_1 ... s_k``. The "Astronomers" PCFG (Manning & Schuetze) ships as package data.
* **Generative model** (:class:`PCFGModel`): ``p_theta(x, z) = l(x | z) p_theta(z)``. ``z`` is a parse
  tree, stored as its *left-most derivation* (the rule indices in pre-order), which is a bijection
  with trees; ``p_theta(z)`` is the product of the chosen rules' probabilities, with one learnable
  softmax per non-terminal (``theta`` = logits). ``l(x | z)`` is the soft relaxation of the 0/1
  likelihood ``1[yield(z) = x]`` used in Le et al.'s code:
  ``log l(x | z) = -c * Lev(yield(z), x)**2`` with ``Lev`` the Levenshtein (edit) distance between
  word sequences and scale ``c = 1`` by default. It equals 1 exactly when the tree parses ``x``, so
  on parses of ``x`` it is the hard likelihood; it is *unnormalised* in ``x`` (its normaliser
  ``sum_x exp(-c Lev(yield z, x)**2)`` depends on ``z``), as in Le et al.
* **Derivation budget.** Sampling stops after ``max_productions`` rule choices; the non-terminals
  still pending are left unexpanded and appear in the yield as the token :attr:`Grammar.unk`
  (never equal to a word, so they cost edits). The budget makes every sampled object finite and
  ``p_theta`` a proper distribution over *budgeted derivations* (a truncated derivation has the
  probability of its chosen rules; the stop is deterministic). Truncations are counted
  (:attr:`Derivations.complete`). A complete tree with ``n`` words of a CNF grammar needs
  ``2n - 1`` productions.
* **Inference network** (:class:`PCFGInferenceNetwork`): a bidirectional GRU reads the sentence;
  a GRU decoder emits the derivation rule by rule, top-down and left-most. Its input at each step
  is the non-terminal being expanded, the previous rule, and the encoder state at the next word
  still to be produced (the number of words already emitted is known from the derivation, so this
  pointer is deterministic). Rules of other non-terminals are masked, so ``log q(z | x)`` is the
  exact sum of the chosen rules' log-probabilities, under the same budget as ``p_theta``.
* **Exact parsing** (:func:`enumerate_parses`, :func:`count_parses`, :func:`inside_log_marginal`):
  a memoised top-down chart over spans (CKY-style; every symbol covers at least one word, so the
  grammar must have no empty rules and no unary cycles) gives the number of parses, the inside
  probability ``p(x) = sum_{z parses x} p(z)``, and the list of all parses (bounded by
  ``max_parses``; raises beyond it).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = [
    "GrammarError",
    "Grammar",
    "load_grammar",
    "replay_derivation",
    "Derivations",
    "encode_sentences",
    "levenshtein",
    "soft_log_likelihood",
    "PCFGModel",
    "PCFGInferenceNetwork",
    "sample_sentences",
    "count_parses",
    "enumerate_parses",
    "inside_log_marginal",
]

_ACCEPTED_KEYS = ("name", "start", "terminals", "rules")
_SUM_TOL = 1e-6


class GrammarError(ValueError):
    """A grammar file or dict is malformed; the message says what was wrong and what is accepted."""


# --------------------------------------------------------------------------------------------
# Grammar
# --------------------------------------------------------------------------------------------


class Grammar:
    """A validated PCFG with integer indices for symbols and rules.

    Symbol ids: non-terminal ``i`` (in file order) is ``i``; terminal ``t`` is ``n_nonterminals + t``.
    Rules are numbered non-terminal by non-terminal in file order, so rule ``r`` has left-hand side
    ``rule_lhs[r]`` and the rules of each non-terminal are contiguous. Token ids of words (used for
    sentences) are terminal indices ``0..V-1``; :attr:`unk` (= V) marks an unexpanded non-terminal
    in a truncated yield and :attr:`pad` (= V + 1) pads batches.
    """

    def __init__(self, spec: dict[str, Any], source: str = "<dict>") -> None:
        where = f"grammar {source}"
        if not isinstance(spec, dict):
            raise GrammarError(f"{where}: expected a JSON object with keys {_ACCEPTED_KEYS}; got {type(spec).__name__}")
        unknown = sorted(set(spec) - set(_ACCEPTED_KEYS))
        missing = [k for k in ("start", "terminals", "rules") if k not in spec]
        if unknown or missing:
            raise GrammarError(f"{where}: keys must be {_ACCEPTED_KEYS} ('name' optional); unknown {unknown}, missing {missing}")
        name, start, terminals, rules = spec.get("name", "grammar"), spec["start"], spec["terminals"], spec["rules"]
        if not isinstance(name, str):
            raise GrammarError(f"{where}: 'name' must be a string; got {name!r}")
        if (not isinstance(terminals, list) or not terminals
                or not all(isinstance(t, str) and t for t in terminals)):
            raise GrammarError(f"{where}: 'terminals' must be a non-empty list of non-empty strings; got {terminals!r}")
        if len(set(terminals)) != len(terminals):
            raise GrammarError(f"{where}: 'terminals' has duplicates: {terminals!r}")
        if not isinstance(rules, dict) or not rules:
            raise GrammarError(f"{where}: 'rules' must be a non-empty object non-terminal -> [[rhs, prob], ...]")
        clash = sorted(set(rules) & set(terminals))
        if clash:
            raise GrammarError(f"{where}: symbols {clash} are both terminals and non-terminals")
        if not isinstance(start, str) or start not in rules:
            raise GrammarError(f"{where}: start symbol {start!r} has no rules; non-terminals are {sorted(rules)}")

        nonterminals = tuple(rules)
        known = set(nonterminals) | set(terminals)
        flat: list[tuple[str, tuple[str, ...], float]] = []
        for lhs, alternatives in rules.items():
            if not isinstance(alternatives, list) or not alternatives:
                raise GrammarError(f"{where}: rules of {lhs!r} must be a non-empty list of [rhs, prob]; got {alternatives!r}")
            seen: set[tuple[str, ...]] = set()
            total = 0.0
            for item in alternatives:
                if not (isinstance(item, (list, tuple)) and len(item) == 2):
                    raise GrammarError(f"{where}: each rule of {lhs!r} must be [rhs, prob]; got {item!r}")
                rhs, prob = item
                if not (isinstance(rhs, list) and rhs and all(isinstance(s, str) for s in rhs)):
                    raise GrammarError(
                        f"{where}: right-hand side of a rule of {lhs!r} must be a non-empty list of symbols "
                        f"(empty rules are not supported); got {rhs!r}")
                undefined = [s for s in rhs if s not in known]
                if undefined:
                    raise GrammarError(
                        f"{where}: rule {lhs} -> {' '.join(rhs)} uses undefined symbols {undefined}; "
                        f"every symbol must be a terminal or a non-terminal with rules")
                if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not (0.0 < prob <= 1.0):
                    raise GrammarError(f"{where}: probability of {lhs} -> {' '.join(rhs)} must be a number in (0, 1]; got {prob!r}")
                if tuple(rhs) in seen:
                    raise GrammarError(f"{where}: rule {lhs} -> {' '.join(rhs)} is listed twice")
                seen.add(tuple(rhs))
                total += float(prob)
                flat.append((lhs, tuple(rhs), float(prob)))
            if abs(total - 1.0) > _SUM_TOL:
                raise GrammarError(f"{where}: probabilities of the rules of {lhs!r} sum to {total!r}, not 1 (tolerance {_SUM_TOL})")

        self.name: str = name
        self.start: str = start
        self.nonterminals: tuple[str, ...] = nonterminals
        self.terminals: tuple[str, ...] = tuple(terminals)
        self.n_nonterminals = len(nonterminals)
        self.n_terminals = len(terminals)
        self.n_rules = len(flat)
        self.unk = self.n_terminals
        self.pad = self.n_terminals + 1
        self.nt_index = {a: i for i, a in enumerate(nonterminals)}
        self.term_index = {t: i for i, t in enumerate(terminals)}
        self.start_id = self.nt_index[start]
        self.rules: tuple[tuple[str, tuple[str, ...]], ...] = tuple((lhs, rhs) for lhs, rhs, _ in flat)
        self.rule_lhs: tuple[int, ...] = tuple(self.nt_index[lhs] for lhs, _, _ in flat)
        self.rule_rhs: tuple[tuple[int, ...], ...] = tuple(tuple(self.symbol_id(s) for s in rhs) for _, rhs, _ in flat)
        self.rules_of: tuple[tuple[int, ...], ...] = tuple(
            tuple(r for r in range(self.n_rules) if self.rule_lhs[r] == a) for a in range(self.n_nonterminals))
        self.true_probs: tuple[float, ...] = tuple(p for _, _, p in flat)
        self.rule_mask = torch.zeros(self.n_nonterminals, self.n_rules, dtype=torch.bool)
        self.rule_mask[torch.tensor(self.rule_lhs), torch.arange(self.n_rules)] = True
        self._check_structure(where)
        rho = self.spectral_radius(self.true_probs)
        if rho >= 1.0:
            raise GrammarError(
                f"{where}: the rule probabilities are critical or super-critical (spectral radius of the "
                f"expected-children matrix {rho:.4f} >= 1), so trees are infinite with positive probability "
                f"or have infinite expected size; a sub-critical grammar is required")

    # -- construction helpers -----------------------------------------------------------------

    def symbol_id(self, symbol: str) -> int:
        """Non-terminal index, or ``n_nonterminals + terminal index``."""
        if symbol in self.nt_index:
            return self.nt_index[symbol]
        return self.n_nonterminals + self.term_index[symbol]

    def is_nonterminal(self, sid: int) -> bool:
        return sid < self.n_nonterminals

    def _check_structure(self, where: str) -> None:
        n = self.n_nonterminals
        # Reachability from the start symbol: every rule must be usable.
        reached, frontier = {self.start_id}, [self.start_id]
        used_terminals: set[int] = set()
        while frontier:
            a = frontier.pop()
            for r in self.rules_of[a]:
                for s in self.rule_rhs[r]:
                    if s >= n:
                        used_terminals.add(s - n)
                    elif s not in reached:
                        reached.add(s)
                        frontier.append(s)
        unreachable = [self.nonterminals[a] for a in range(n) if a not in reached]
        if unreachable:
            listed = "; ".join(f"{self.rule_str(r)}" for a in unreachable for r in self.rules_of[self.nt_index[a]])
            raise GrammarError(f"{where}: non-terminals {unreachable} are unreachable from the start symbol "
                               f"{self.start!r}, so their rules ({listed}) can never be used")
        unused = [self.terminals[t] for t in range(self.n_terminals) if t not in used_terminals]
        if unused:
            raise GrammarError(f"{where}: terminals {unused} appear in no rule reachable from {self.start!r}")
        # Productivity: every non-terminal must derive some finite sentence.
        productive: set[int] = set()
        changed = True
        while changed:
            changed = False
            for r in range(self.n_rules):
                a = self.rule_lhs[r]
                if a not in productive and all(s >= n or s in productive for s in self.rule_rhs[r]):
                    productive.add(a)
                    changed = True
        barren = [self.nonterminals[a] for a in range(n) if a not in productive]
        if barren:
            raise GrammarError(f"{where}: non-terminals {barren} derive no finite sentence")
        # Unary cycles A =>+ A make the parse set of a sentence infinite (exact enumeration fails).
        unary = {a: {self.rule_rhs[r][0] for r in self.rules_of[a]
                     if len(self.rule_rhs[r]) == 1 and self.rule_rhs[r][0] < n} for a in range(n)}
        for a in range(n):
            seen, stack = set(), list(unary[a])
            while stack:
                b = stack.pop()
                if b == a:
                    raise GrammarError(f"{where}: non-terminal {self.nonterminals[a]!r} rewrites to itself through "
                                       f"unary rules; unary cycles are not supported (parse sets would be infinite)")
                if b not in seen:
                    seen.add(b)
                    stack.extend(unary[b])

    # -- probabilities --------------------------------------------------------------------------

    def mean_matrix(self, probs: Sequence[float] | Tensor) -> np.ndarray:
        """``M[A, B]`` = expected number of ``B`` children when expanding ``A`` under rule probs ``probs``."""
        p = np.asarray(torch.as_tensor(probs, dtype=torch.float64).detach().cpu())
        m = np.zeros((self.n_nonterminals, self.n_nonterminals))
        for r in range(self.n_rules):
            for s in self.rule_rhs[r]:
                if s < self.n_nonterminals:
                    m[self.rule_lhs[r], s] += p[r]
        return m

    def spectral_radius(self, probs: Sequence[float] | Tensor) -> float:
        """Largest |eigenvalue| of :meth:`mean_matrix`; < 1 means finite trees with finite expected size."""
        return float(np.max(np.abs(np.linalg.eigvals(self.mean_matrix(probs)))))

    def expected_expansions(self, probs: Sequence[float] | Tensor) -> np.ndarray:
        """Expected number of times each non-terminal is expanded in one (unbudgeted) tree.

        ``c = e_start^T (I - M)^{-1}``; ``inf`` everywhere when the spectral radius is >= 1.
        """
        m = self.mean_matrix(probs)
        if float(np.max(np.abs(np.linalg.eigvals(m)))) >= 1.0:
            return np.full(self.n_nonterminals, np.inf)
        e = np.zeros(self.n_nonterminals)
        e[self.start_id] = 1.0
        return np.linalg.solve((np.eye(self.n_nonterminals) - m).T, e)

    def true_log_probs(self) -> Tensor:
        """The file's rule probabilities as float64 log-probabilities, shape ``(n_rules,)``."""
        return torch.tensor(self.true_probs, dtype=torch.float64).log()

    # -- words -----------------------------------------------------------------------------------

    def tokenize(self, sentence: str | Sequence[str]) -> tuple[int, ...]:
        """Words (a space-separated string or a list) as terminal ids; unknown words raise."""
        words = sentence.split() if isinstance(sentence, str) else list(sentence)
        bad = [w for w in words if w not in self.term_index]
        if bad or not words:
            raise ValueError(f"sentence must be a non-empty sequence of terminals {self.terminals}; unknown {bad}")
        return tuple(self.term_index[w] for w in words)

    def words(self, tokens: Sequence[int]) -> list[str]:
        """Terminal ids back to words (``<unk>`` for :attr:`unk`)."""
        return [self.terminals[t] if t < self.n_terminals else "<unk>" for t in tokens]

    def rule_str(self, r: int) -> str:
        lhs, rhs = self.rules[r]
        return f"{lhs} -> {' '.join(rhs)}"

    def to_dict(self) -> dict[str, Any]:
        """The grammar in the file format (round-trips through :class:`Grammar`)."""
        rules: dict[str, list] = {a: [] for a in self.nonterminals}
        for (lhs, rhs), p in zip(self.rules, self.true_probs):
            rules[lhs].append([list(rhs), p])
        return {"name": self.name, "start": self.start, "terminals": list(self.terminals), "rules": rules}

    def __repr__(self) -> str:
        return (f"Grammar({self.name!r}: {self.n_nonterminals} non-terminals, {self.n_terminals} terminals, "
                f"{self.n_rules} rules)")


def load_grammar(source: str | PathLike[str] | dict[str, Any] = "astronomers") -> Grammar:
    """Load and validate a grammar: a packaged name (``"astronomers"``), a JSON file path, or a dict.

    Raises :class:`GrammarError` (a ``ValueError``) naming what is wrong: probabilities of a
    non-terminal not summing to 1, undefined symbols, unreachable or barren non-terminals, unused
    terminals, duplicate or empty rules, unary cycles, or super-critical probabilities.
    """
    if isinstance(source, dict):
        return Grammar(source)
    text_source = str(source)
    packaged = resources.files("tvolib").joinpath("grammars", f"{text_source}.json")
    if "/" not in text_source and not text_source.endswith(".json") and packaged.is_file():
        return Grammar(json.loads(packaged.read_text()), source=f"'{text_source}' (packaged)")
    path = Path(source)
    if not path.is_file():
        available = sorted(p.name[:-5] for p in resources.files("tvolib").joinpath("grammars").iterdir()
                           if p.name.endswith(".json"))
        raise GrammarError(f"no grammar {text_source!r}: not a file and not a packaged grammar {available}")
    try:
        spec = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise GrammarError(f"grammar {path}: not valid JSON ({err})") from err
    return Grammar(spec, source=str(path))


# --------------------------------------------------------------------------------------------
# Derivations (trees as left-most derivations)
# --------------------------------------------------------------------------------------------


def replay_derivation(grammar: Grammar, rules: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """Replay a left-most derivation: ``(yield tokens, pointer per step, complete)``.

    ``pointer[t]`` is the number of words emitted before step ``t``. The yield of an incomplete
    (budget-truncated) derivation lists the pending symbols after the emitted words, a pending
    non-terminal as :attr:`Grammar.unk`. Raises ``ValueError`` if a rule does not expand the
    left-most pending non-terminal, or if rules follow a complete tree.
    """
    n = grammar.n_nonterminals
    stack = [grammar.start_id]
    words: list[int] = []
    pointers: list[int] = []
    for t, r in enumerate(rules):
        if not stack:
            raise ValueError(f"derivation continues after the tree is complete (step {t}, rule {r})")
        top = stack.pop()
        if not 0 <= r < grammar.n_rules or grammar.rule_lhs[r] != top:
            raise ValueError(f"step {t}: rule {r} does not expand the left-most pending non-terminal "
                             f"{grammar.nonterminals[top]!r}")
        pointers.append(len(words))
        stack.extend(reversed(grammar.rule_rhs[r]))
        while stack and stack[-1] >= n:
            words.append(stack.pop() - n)
    complete = not stack
    pending = [s - n if s >= n else grammar.unk for s in reversed(stack)]
    return tuple(words + pending), tuple(pointers), complete


def encode_sentences(sentences: Sequence[Sequence[int]], grammar: Grammar,
                     device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """Pad token sequences: ``(tokens (B, L) long padded with grammar.pad, lengths (B,) long)``."""
    lengths = [len(s) for s in sentences]
    if not sentences or min(lengths) < 1:
        raise ValueError("sentences must be a non-empty list of non-empty token sequences")
    width = max(lengths)
    tokens = torch.tensor([list(s) + [grammar.pad] * (width - len(s)) for s in sentences], dtype=torch.long)
    return tokens.to(device), torch.tensor(lengths, dtype=torch.long, device=device)


@dataclass
class Derivations:
    """A batch of ``n`` budgeted left-most derivations with the padded tensors the models need.

    ``rules`` are the Python tuples (hashable tree ids); tensors: ``steps``/``lhs``/``prev``/
    ``pointer``/``step_mask`` ``(n, T)`` (``prev`` is the previous rule + 1, 0 at the first step),
    ``counts`` ``(n, n_rules)`` rule-use counts, ``yields``/``yield_len`` the (padded) yields,
    ``complete`` ``(n,)`` whether the tree finished within the budget.
    """

    rules: list[tuple[int, ...]]
    yields_list: list[tuple[int, ...]]
    steps: Tensor
    lhs: Tensor
    prev: Tensor
    pointer: Tensor
    step_mask: Tensor
    counts: Tensor
    yields: Tensor
    yield_len: Tensor
    complete: Tensor

    @classmethod
    def build(cls, grammar: Grammar, rules: Sequence[Sequence[int]],
              device: torch.device | str | None = None) -> Derivations:
        if not rules or min(len(r) for r in rules) < 1:
            raise ValueError("need at least one derivation, each with at least one rule")
        n, t_max = len(rules), max(len(r) for r in rules)
        steps_l, ptr_l, yields_list, complete = [], [], [], []
        for rs in rules:
            words, ptrs, done = replay_derivation(grammar, rs)
            pad = [0] * (t_max - len(rs))
            steps_l.append(list(rs) + pad)
            ptr_l.append(list(ptrs) + pad)
            yields_list.append(words)
            complete.append(done)
        steps = torch.tensor(steps_l, dtype=torch.long)
        pointer = torch.tensor(ptr_l, dtype=torch.long)
        mask = torch.arange(t_max)[None] < torch.tensor([len(r) for r in rules])[:, None]
        lhs = torch.as_tensor(grammar.rule_lhs, dtype=torch.long)[steps]
        prev = torch.cat([torch.zeros(n, 1, dtype=torch.long), steps[:, :-1] + 1], dim=1) * mask
        counts = torch.zeros(n, grammar.n_rules)
        counts.scatter_add_(1, steps, mask.float())
        yields, yield_len = encode_sentences(yields_list, grammar)
        to = {"device": device}
        return cls([tuple(int(r) for r in rs) for rs in rules], yields_list, steps.to(**to), lhs.to(**to),
                   prev.to(**to), pointer.to(**to), mask.to(**to), counts.to(**to), yields.to(**to),
                   yield_len.to(**to), torch.tensor(complete, device=device))

    def __len__(self) -> int:
        return len(self.rules)


# A policy maps (current non-terminal ids, previous rule + 1, pointer), each (n,), to (n, n_rules)
# log-probabilities (zero mass outside the non-terminal's rules).
Policy = Callable[[Tensor, Tensor, Tensor], Tensor]


def _inverse_cdf(probs: Tensor, u: Tensor, last_rule: Tensor) -> Tensor:
    """Categorical draws by inverse CDF: the first index whose cumulative probability reaches ``u``.

    ``probs`` ``(n, R)`` is zero outside each row's allowed rules, so the first index reached has
    positive mass; ``last_rule`` (the row's last allowed index) guards against rounding of the sum.
    """
    idx = (probs.cumsum(dim=1) < u[:, None]).sum(dim=1)
    return torch.minimum(idx, last_rule)


def _sample_lockstep(grammar: Grammar, n: int, policy: Policy, generator: torch.Generator,
                     max_productions: int, device: torch.device) -> tuple[list[tuple[int, ...]], Tensor]:
    """Sample ``n`` left-most derivations in lock step (one batched policy call per step).

    Randomness: one block of uniforms ``(n, max_productions)`` is drawn from ``generator`` up front
    (so the stream consumed does not depend on the trees) and step ``t`` of tree ``k`` uses
    ``u[k, t]`` by inverse CDF. Stack bookkeeping is plain Python (the grammar is tiny; the batched
    network call dominates). Returns the rule tuples and the float64 sum of the chosen rules'
    log-probabilities as the sampler saw them (tests check that re-scoring gives the same).
    """
    if not (isinstance(max_productions, int) and max_productions >= 1):
        raise ValueError(f"max_productions must be an int >= 1; got {max_productions!r}")
    nt_count = grammar.n_nonterminals
    uniforms = torch.rand(n, max_productions, generator=generator, device=device)
    last_rule = torch.tensor([rs[-1] for rs in grammar.rules_of], device=device)
    stacks = [[grammar.start_id] for _ in range(n)]
    rules: list[list[int]] = [[] for _ in range(n)]
    emitted = [0] * n
    prev = [0] * n
    total = torch.zeros(n, dtype=torch.float64, device=device)
    for t in range(max_productions):
        active = [k for k in range(n) if stacks[k]]
        if not active:
            break
        nt = torch.tensor([stacks[k][-1] if stacks[k] else 0 for k in range(n)], device=device)
        logp = policy(nt, torch.tensor(prev, device=device), torch.tensor(emitted, device=device))
        choice = _inverse_cdf(logp.exp(), uniforms[:, t], last_rule[nt])
        alive = torch.tensor([bool(s) for s in stacks], device=device)
        total += torch.where(alive, logp.gather(1, choice[:, None]).squeeze(1).double(), 0.0)
        chosen = choice.tolist()
        for k in active:
            r = chosen[k]
            stack = stacks[k]
            stack.pop()
            stack.extend(reversed(grammar.rule_rhs[r]))
            while stack and stack[-1] >= nt_count:
                stack.pop()
                emitted[k] += 1
            rules[k].append(r)
            prev[k] = r + 1
    return [tuple(r) for r in rules], total


def _sample_prior(grammar: Grammar, table: Tensor, n: int, generator: torch.Generator,
                  max_productions: int) -> list[tuple[int, ...]]:
    """Budgeted derivations from fixed rule probabilities, one tree at a time in plain Python.

    Same randomness convention as :func:`_sample_lockstep` (a uniform block ``(n, max_productions)``,
    inverse CDF per step) but without a per-step tensor call, which makes it much faster for
    trees of very different sizes.
    """
    if not (isinstance(max_productions, int) and max_productions >= 1):
        raise ValueError(f"max_productions must be an int >= 1; got {max_productions!r}")
    probs = table.detach().double().exp().cpu()
    cdfs = [[(r, c) for r, c in zip(rs, probs[a, list(rs)].cumsum(0).tolist())] for a, rs in enumerate(grammar.rules_of)]
    uniforms = torch.rand(n, max_productions, generator=generator, device=table.device).cpu().tolist()
    nt_count = grammar.n_nonterminals
    out: list[tuple[int, ...]] = []
    for k in range(n):
        stack, chosen, u = [grammar.start_id], [], uniforms[k]
        for t in range(max_productions):
            cdf = cdfs[stack.pop()]
            r = next((rule for rule, c in cdf if c >= u[t]), cdf[-1][0])
            chosen.append(r)
            stack.extend(reversed(grammar.rule_rhs[r]))
            while stack and stack[-1] >= nt_count:
                stack.pop()
            if not stack:
                break
        out.append(tuple(chosen))
    return out


# --------------------------------------------------------------------------------------------
# Soft likelihood
# --------------------------------------------------------------------------------------------


def levenshtein(a: Tensor, a_len: Tensor, b: Tensor, b_len: Tensor) -> Tensor:
    """Batched Levenshtein distance between token rows ``a[k, :a_len[k]]`` and ``b[k, :b_len[k]]``.

    Row-by-row dynamic programme, vectorised over the batch and over each row: with
    ``E[j] = min(D[i-1, j] + 1, D[i-1, j-1] + [a_i != b_j])`` the in-row insertion chain is
    ``D[i, j] = j + cummin_k<=j (E[k] - k)``. Written by hand because no edit-distance library is
    a dependency; works on any device. Returns float ``(n,)``.
    """
    n, la = a.shape
    lb = b.shape[1]
    j = torch.arange(lb + 1, device=a.device, dtype=torch.float32)
    row = j.expand(n, lb + 1).clone()
    out = torch.where(a_len == 0, b_len.float(), torch.zeros(n, device=a.device))
    for i in range(1, la + 1):
        sub = row[:, :-1] + (a[:, i - 1: i] != b).float()
        e = torch.cat([torch.full((n, 1), float(i), device=a.device), torch.minimum(row[:, 1:] + 1, sub)], dim=1)
        row = j + torch.cummin(e - j, dim=1).values
        out = torch.where(a_len == i, row.gather(1, b_len[:, None]).squeeze(1), out)
    return out


def soft_log_likelihood(yields: Tensor, yield_len: Tensor, sentences: Tensor, sentence_len: Tensor,
                        scale: float = 1.0) -> Tensor:
    """``log l(x | z) = -scale * Lev(yield(z), x)**2`` (Le et al. 2019's relaxation; 0 on exact parses)."""
    return -scale * levenshtein(yields, yield_len, sentences, sentence_len) ** 2


# --------------------------------------------------------------------------------------------
# Generative model
# --------------------------------------------------------------------------------------------


def _masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    return logits.masked_fill(~mask, float("-inf")).log_softmax(dim=-1)


class PCFGModel(nn.Module):
    """``p_theta(z)``: one learnable softmax over the rules of each non-terminal.

    ``init``: ``"normal"`` draws the logits from N(0, 1) (as Le et al.'s released code does),
    ``"uniform"`` sets them to 0, ``"true"`` starts at the grammar's probabilities.
    """

    def __init__(self, grammar: Grammar, init: str = "normal", generator: torch.Generator | None = None) -> None:
        super().__init__()
        if init not in ("normal", "uniform", "true"):
            raise ValueError(f"init must be 'normal', 'uniform' or 'true'; got {init!r}")
        self.grammar = grammar
        if init == "normal":
            logits = torch.randn(grammar.n_rules, generator=generator)
        elif init == "uniform":
            logits = torch.zeros(grammar.n_rules)
        else:
            logits = grammar.true_log_probs().float()
        self.logits = nn.Parameter(logits)
        self.register_buffer("rule_mask", grammar.rule_mask.clone(), persistent=False)
        self.register_buffer("rule_lhs", torch.tensor(grammar.rule_lhs), persistent=False)

    def log_prob_table(self) -> Tensor:
        """``(n_nonterminals, n_rules)`` log-probabilities, ``-inf`` outside each non-terminal's rules."""
        return _masked_log_softmax(self.logits.expand(self.grammar.n_nonterminals, -1), self.rule_mask)

    def log_probs(self) -> Tensor:
        """``(n_rules,)`` log-probability of each rule given its left-hand side."""
        return self.log_prob_table().gather(0, self.rule_lhs[None]).squeeze(0)

    def log_prior(self, derivations: Derivations) -> Tensor:
        """``log p_theta(z)`` for each derivation, ``(n,)`` (differentiable in theta)."""
        return derivations.counts @ self.log_probs()

    def sample(self, n: int, generator: torch.Generator, max_productions: int) -> Derivations:
        """``n`` budgeted derivations from ``p_theta`` (no gradient)."""
        return sample_from_table(self.grammar, self.log_prob_table().detach(), n, generator, max_productions)


def sample_from_table(grammar: Grammar, table: Tensor, n: int, generator: torch.Generator,
                      max_productions: int) -> Derivations:
    """Budgeted derivations from rule log-probabilities ``table`` ``(n_nonterminals, n_rules)``."""
    return Derivations.build(grammar, _sample_prior(grammar, table, n, generator, max_productions), table.device)


def sample_sentences(grammar: Grammar, table: Tensor, n: int, generator: torch.Generator, *,
                     max_words: int, max_productions: int, batch: int = 256,
                     max_tries: int = 1000) -> list[tuple[int, ...]]:
    """``n`` sentences from the PCFG ``table`` conditioned on a complete tree with ``<= max_words`` words.

    Rejection sampling in batches; raises if fewer than ``n`` are accepted in ``max_tries`` batches.
    """
    out: list[tuple[int, ...]] = []
    for _ in range(max_tries):
        d = sample_from_table(grammar, table, batch, generator, max_productions)
        for words, ok in zip(d.yields_list, d.complete.tolist()):
            if ok and len(words) <= max_words:
                out.append(words)
                if len(out) == n:
                    return out
    raise RuntimeError(f"accepted only {len(out)} of {n} sentences with <= {max_words} words "
                       f"within {max_productions} productions after {max_tries * batch} draws")


# --------------------------------------------------------------------------------------------
# Inference network
# --------------------------------------------------------------------------------------------


class PCFGInferenceNetwork(nn.Module):
    """``q_phi(z | x)``: GRU sentence encoder + GRU derivation decoder (top-down, left-most).

    Sizes: word/symbol embeddings ``embed_dim``, encoder ``hidden_dim // 2`` per direction,
    decoder ``hidden_dim`` (Le et al. use 100-unit GRUs).
    """

    def __init__(self, grammar: Grammar, hidden_dim: int = 100, embed_dim: int = 32) -> None:
        super().__init__()
        if hidden_dim < 2 or embed_dim < 1:
            raise ValueError(f"hidden_dim must be >= 2 and embed_dim >= 1; got {hidden_dim}, {embed_dim}")
        self.grammar = grammar
        enc_half = hidden_dim // 2
        self.enc_dim = 2 * enc_half
        self.word_emb = nn.Embedding(grammar.n_terminals + 2, embed_dim, padding_idx=grammar.pad)
        self.encoder = nn.GRU(embed_dim, enc_half, batch_first=True, bidirectional=True)
        self.end_of_sentence = nn.Parameter(torch.zeros(self.enc_dim))
        self.init_hidden = nn.Linear(self.enc_dim, hidden_dim)
        self.nt_emb = nn.Embedding(grammar.n_nonterminals, embed_dim)
        self.rule_emb = nn.Embedding(grammar.n_rules + 1, embed_dim)
        self.decoder = nn.GRU(2 * embed_dim + self.enc_dim, hidden_dim, batch_first=True)
        self.head = nn.Linear(hidden_dim, grammar.n_rules)
        self.register_buffer("rule_mask", grammar.rule_mask.clone(), persistent=False)

    def encode(self, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``memory (B, L + 1, enc_dim)`` (position >= length holds the end-of-sentence vector) and ``h0 (B, H)``."""
        b, length = tokens.shape
        packed = pack_padded_sequence(self.word_emb(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=length)
        valid = torch.arange(length + 1, device=tokens.device)[None] < lengths[:, None]
        out = torch.cat([out, out.new_zeros(b, 1, self.enc_dim)], dim=1)
        memory = torch.where(valid[..., None], out, self.end_of_sentence)
        pooled = (out * valid[..., None]).sum(1) / lengths[:, None].float()
        return memory, torch.tanh(self.init_hidden(pooled))

    def _inputs(self, memory: Tensor, lengths: Tensor, nt: Tensor, prev: Tensor, ptr: Tensor) -> Tensor:
        ptr = torch.minimum(ptr, lengths.view(-1, *([1] * (ptr.dim() - 1))))
        if ptr.dim() == 1:
            ctx = memory[torch.arange(memory.shape[0], device=memory.device), ptr]
        else:
            ctx = memory.gather(1, ptr[..., None].expand(-1, -1, memory.shape[-1]))
        return torch.cat([self.nt_emb(nt), self.rule_emb(prev), ctx], dim=-1)

    @torch.no_grad()
    def sample(self, tokens: Tensor, lengths: Tensor, n_per: int, generator: torch.Generator,
               max_productions: int) -> tuple[Derivations, Tensor]:
        """``n_per`` derivations per sentence (rows sentence-major: row ``b * n_per + s``), no gradient.

        Returns the derivations and the sampler's own ``log q`` (float64), equal to
        :meth:`log_prob` up to float rounding.
        """
        memory, h0 = self.encode(tokens, lengths)
        rows = torch.arange(tokens.shape[0], device=tokens.device).repeat_interleave(n_per)
        # The decoder's input projection W_ih [nt_emb; rule_emb; ctx] + b_ih splits into three
        # lookups, precomputed once, so each step costs one (n, H) x (H, 3H) product (same maths
        # as nn.GRU, gate order r, z, n).
        gru, e = self.decoder, self.nt_emb.embedding_dim
        w_ih = gru.weight_ih_l0
        nt_proj = self.nt_emb.weight @ w_ih[:, :e].T
        rule_proj = self.rule_emb.weight @ w_ih[:, e: 2 * e].T
        ctx_proj = (memory @ w_ih[:, 2 * e:].T + gru.bias_ih_l0)[rows]
        lens, index = lengths[rows], torch.arange(len(rows), device=tokens.device)
        state = {"h": h0[rows]}

        def policy(nt: Tensor, prev: Tensor, ptr: Tensor) -> Tensor:
            gi = nt_proj[nt] + rule_proj[prev] + ctx_proj[index, torch.minimum(ptr, lens)]
            gh = nn.functional.linear(state["h"], gru.weight_hh_l0, gru.bias_hh_l0)
            i_r, i_z, i_n = gi.chunk(3, dim=1)
            h_r, h_z, h_n = gh.chunk(3, dim=1)
            r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
            cand = torch.tanh(i_n + r * h_n)
            state["h"] = cand + z * (state["h"] - cand)
            return _masked_log_softmax(self.head(state["h"]), self.rule_mask[nt])

        rules, log_q = _sample_lockstep(self.grammar, len(rows), policy, generator, max_productions, tokens.device)
        return Derivations.build(self.grammar, rules, tokens.device), log_q

    def log_prob(self, derivations: Derivations, tokens: Tensor, lengths: Tensor, rows: Tensor) -> Tensor:
        """Exact ``log q(z_k | x_{rows[k]})`` by teacher forcing, ``(n,)``, differentiable in phi."""
        memory, h0 = self.encode(tokens, lengths)
        x = self._inputs(memory[rows], lengths[rows], derivations.lhs, derivations.prev, derivations.pointer)
        out, _ = self.decoder(x, h0[rows][None].contiguous())
        logp = _masked_log_softmax(self.head(out), self.rule_mask[derivations.lhs])
        chosen = logp.gather(-1, derivations.steps[..., None]).squeeze(-1)
        return torch.where(derivations.step_mask, chosen, torch.zeros_like(chosen)).sum(1)


# --------------------------------------------------------------------------------------------
# Exact parsing
# --------------------------------------------------------------------------------------------


def _span_chart(grammar: Grammar, words: Sequence[int], rule_value: Callable[[int], Any], zero: Any, one: Any,
                add: Callable[[Any, Any], Any], mul: Callable[[Any, Any], Any]) -> Any:
    """Semiring value of the start symbol over the whole sentence (memoised top-down chart).

    ``sym(s, i, j)`` covers ``words[i:j]`` by symbol ``s``; ``seq(symbols, i, j)`` by a sequence of
    symbols, each covering at least one word (valid: no empty rules; terminates: no unary cycles).
    """
    n_nt = grammar.n_nonterminals
    words = tuple(words)
    if not words:
        raise ValueError("sentence must have at least one word")

    @cache
    def sym(s: int, i: int, j: int) -> Any:
        if s >= n_nt:
            return one if (j == i + 1 and words[i] == s - n_nt) else zero
        total = zero
        for r in grammar.rules_of[s]:
            if len(grammar.rule_rhs[r]) <= j - i:
                inner = seq(grammar.rule_rhs[r], i, j)
                if inner != zero:
                    total = add(total, mul(rule_value(r), inner))
        return total

    @cache
    def seq(symbols: tuple[int, ...], i: int, j: int) -> Any:
        if len(symbols) == 1:
            return sym(symbols[0], i, j)
        total = zero
        for m in range(i + 1, j - len(symbols) + 2):
            head = sym(symbols[0], i, m)
            if head != zero:
                tail = seq(symbols[1:], m, j)
                if tail != zero:
                    total = add(total, mul(head, tail))
        return total

    return sym(grammar.start_id, 0, len(words))


def count_parses(grammar: Grammar, words: Sequence[int]) -> int:
    """Number of parse trees of ``words`` (terminal ids) from the start symbol (exact integer)."""
    return _span_chart(grammar, words, lambda r: 1, 0, 1, lambda a, b: a + b, lambda a, b: a * b)


def inside_log_marginal(grammar: Grammar, log_probs: Tensor | Sequence[float], words: Sequence[int]) -> float:
    """``log sum_{z parses x} p(z)`` by the inside algorithm (float64; ``-inf`` if no parse)."""
    probs = torch.as_tensor(log_probs, dtype=torch.float64).detach().cpu().exp().tolist()
    total = _span_chart(grammar, words, lambda r: probs[r], 0.0, 1.0, lambda a, b: a + b, lambda a, b: a * b)
    return math.log(total) if total > 0 else float("-inf")


def enumerate_parses(grammar: Grammar, words: Sequence[int], max_parses: int = 100_000) -> list[tuple[int, ...]]:
    """All parses of ``words`` as left-most derivations (rule tuples), in a deterministic order.

    The parses are counted first; more than ``max_parses`` raises ``ValueError`` (enumeration is
    exponential in the number of attachment ambiguities, so evaluation sentences are kept short).
    """
    count = count_parses(grammar, words)
    if count > max_parses:
        raise ValueError(f"sentence of {len(words)} words has {count} parses > max_parses={max_parses}; "
                         f"use shorter evaluation sentences or raise max_parses")
    return _span_chart(grammar, words, lambda r: [(r,)], [], [()], lambda a, b: a + b,
                       lambda a, b: [x + y for x in a for y in b])
