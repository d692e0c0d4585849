"""A validated probabilistic context-free grammar (the paper's Appendix D.1) and its loader.

A PCFG has non-terminals ``A`` with weighted rules ``A -> s_1 ... s_k``; the probabilities of the
rules of each non-terminal sum to 1. The "Astronomers" grammar of Manning & Schuetze (used by
Le et al. 2019, Section 4.1, and by the paper's Fig. 6) ships as package data::

    S  -> NP VP 1.0             PP -> P NP 1.0        P -> with 1.0      V -> saw 1.0
    VP -> V NP 0.7 | VP PP 0.3
    NP -> NP PP 0.4 | astronomers 0.1 | ears 0.18 | saw 0.04 | stars 0.18 | telescopes 0.1
"""
from __future__ import annotations

import json
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["GrammarError", "Grammar", "load_grammar"]

_ACCEPTED_KEYS = ("name", "start", "terminals", "rules")
_SUM_TOL = 1e-6

Rule = tuple[str, tuple[str, ...], float]


class GrammarError(ValueError):
    """A grammar file or dict is malformed; the message says what was wrong and what is accepted."""


def _check_keys(spec: Any, where: str) -> tuple[str, str, list[str], dict[str, Any]]:
    """The four top-level fields of a grammar spec, checked for type and consistency."""
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
    return name, start, terminals, rules


def _check_rules(lhs: str, alternatives: Any, known: set[str], where: str) -> list[Rule]:
    """The rules of one non-terminal as ``(lhs, rhs, prob)``; their probabilities must sum to 1."""
    if not isinstance(alternatives, list) or not alternatives:
        raise GrammarError(f"{where}: rules of {lhs!r} must be a non-empty list of [rhs, prob]; got {alternatives!r}")
    out: list[Rule] = []
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
        if any(tuple(rhs) == seen for _, seen, _ in out):
            raise GrammarError(f"{where}: rule {lhs} -> {' '.join(rhs)} is listed twice")
        out.append((lhs, tuple(rhs), float(prob)))
    total = 0.0
    for _, _, prob in out:
        total += prob
    if abs(total - 1.0) > _SUM_TOL:
        raise GrammarError(f"{where}: probabilities of the rules of {lhs!r} sum to {total!r}, not 1 (tolerance {_SUM_TOL})")
    return out


class Grammar:
    """A validated PCFG with integer indices for symbols and rules.

    Symbol ids: non-terminal ``i`` (in file order) is ``i``; terminal ``t`` is ``n_nonterminals + t``.
    Rules are numbered non-terminal by non-terminal in file order, so rule ``r`` has left-hand side
    ``rule_lhs[r]`` and the rules of each non-terminal are contiguous. Token ids of words (used for
    sentences) are terminal indices ``0..V-1``; :attr:`unk` (= V) marks an unexpanded non-terminal
    in a truncated yield and :attr:`pad` (= V + 1) pads batches.

    Args:
        spec: ``{"name": str (optional), "start": str, "terminals": [str, ...],
            "rules": {lhs: [[rhs symbols], prob], ...}}``.
        source: where ``spec`` came from, used in error messages.

    Raises:
        GrammarError: naming what is wrong (see :func:`load_grammar`).

    Example:
        >>> g = Grammar({"start": "S", "terminals": ["a"], "rules": {"S": [[["a"], 1.0]]}})
        >>> g.n_rules, g.rule_str(0)
        (1, 'S -> a')
    """

    def __init__(self, spec: dict[str, Any], source: str = "<dict>") -> None:
        where = f"grammar {source}"
        name, start, terminals, rules = _check_keys(spec, where)
        known = set(rules) | set(terminals)
        flat = [rule for lhs, alternatives in rules.items() for rule in _check_rules(lhs, alternatives, known, where)]
        nonterminals = tuple(rules)
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
        self._check_reachable(where)
        self._check_productive(where)
        self._check_unary_cycles(where)
        rho = self.spectral_radius(self.true_probs)
        if rho >= 1.0:
            raise GrammarError(
                f"{where}: the rule probabilities are critical or super-critical (spectral radius of the "
                f"expected-children matrix {rho:.4f} >= 1), so trees are infinite with positive probability "
                f"or have infinite expected size; a sub-critical grammar is required")

    # -- structure checks -------------------------------------------------------------------------

    def symbol_id(self, symbol: str) -> int:
        """Non-terminal index, or ``n_nonterminals + terminal index``."""
        if symbol in self.nt_index:
            return self.nt_index[symbol]
        return self.n_nonterminals + self.term_index[symbol]

    def is_nonterminal(self, sid: int) -> bool:
        """Whether symbol id ``sid`` is a non-terminal."""
        return sid < self.n_nonterminals

    def _check_reachable(self, where: str) -> None:
        """Every non-terminal and terminal must be reachable from the start symbol."""
        n = self.n_nonterminals
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

    def _check_productive(self, where: str) -> None:
        """Every non-terminal must derive some finite sentence."""
        n = self.n_nonterminals
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

    def _check_unary_cycles(self, where: str) -> None:
        """No ``A =>+ A`` through unary rules (it would make a sentence's parse set infinite)."""
        n = self.n_nonterminals
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
        """``M[A, B] = sum_{r: A -> rhs} p_r * #(B in rhs)``, the expected number of ``B`` children of ``A``."""
        p = np.asarray(torch.as_tensor(probs, dtype=torch.float64).detach().cpu())
        m = np.zeros((self.n_nonterminals, self.n_nonterminals))
        for r in range(self.n_rules):
            for s in self.rule_rhs[r]:
                if s < self.n_nonterminals:
                    m[self.rule_lhs[r], s] += p[r]
        return m

    def spectral_radius(self, probs: Sequence[float] | Tensor) -> float:
        """Largest ``|eigenvalue|`` of :meth:`mean_matrix`; ``< 1`` means finite trees with finite expected size."""
        return float(np.max(np.abs(np.linalg.eigvals(self.mean_matrix(probs)))))

    def expected_expansions(self, probs: Sequence[float] | Tensor) -> np.ndarray:
        """Expected number of times each non-terminal is expanded in one (uncapped) tree.

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
        """Rule ``r`` as text, e.g. ``"NP -> NP PP"``."""
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

    Args:
        source: a packaged grammar name, a path to a JSON file in the format of :class:`Grammar`,
            or the spec itself.

    Returns:
        The validated :class:`Grammar`.

    Raises:
        GrammarError: (a ``ValueError``) naming what is wrong: probabilities of a non-terminal not
            summing to 1, undefined symbols, unreachable or barren non-terminals, unused terminals,
            duplicate or empty rules, unary cycles, super-critical probabilities, a missing file
            or invalid JSON.

    Example:
        >>> load_grammar("astronomers")
        Grammar('astronomers': 6 non-terminals, 6 terminals, 12 rules)
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
