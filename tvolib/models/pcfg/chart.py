"""Exact parsing of a sentence: the number of parses, the inside probability, all parses.

One span chart serves the three through a semiring ``(zero, one, add, mul, rule value)``:
``sym(A, i, j) = sum_{r: A -> s_1..s_k} value(r) * seq((s_1..s_k), i, j)`` covers ``words[i:j]`` by
``A``, and ``seq((s_1..s_k), i, j) = sum_m sym(s_1, i, m) * seq((s_2..s_k), m, j)`` by a sequence
of symbols, each covering at least one word (valid because the grammar has no empty rules; the
unary-cycle check makes it terminate). With counts it gives ``|T(x)|``, with probabilities the
inside probability ``p(x) = sum_{z in T(x)} p(z)``, with lists of derivations the parse set
``T(x)`` itself. The chart is evaluated top-down over the cells the start symbol reaches, with an
explicit stack (no recursion), so sentences of any length fit.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Generator, Sequence

import torch
from torch import Tensor

from tvolib.models.pcfg.grammar import Grammar

__all__ = ["MAX_PARSES", "count_parses", "inside_log_marginal", "enumerate_parses"]

#: The default bound on the parses :func:`enumerate_parses` lists (enumeration is exponential in
#: the number of attachment ambiguities; exact evaluation sentences are kept short).
MAX_PARSES = 10_000

# A cell is (symbol id, i, j) for a symbol, or (symbol ids, i, j) for a sequence of >= 2 symbols.
Cell = tuple[Any, int, int]
CellProgram = Generator[Cell, Any, Any]


def _span_chart(grammar: Grammar, words: Sequence[int], rule_value: Callable[[int], Any], zero: Any, one: Any,
                add: Callable[[Any, Any], Any], mul: Callable[[Any, Any], Any]) -> Any:
    """Semiring value of ``sym(start, 0, len(words))`` (module docstring).

    Each non-terminal or sequence cell is a generator that yields the cells it needs and receives
    their values; a driver loop runs them on an explicit stack and memoises finished cells.
    Terms are added in the same order as the recursive definition, so float results do not depend
    on the evaluation order. A cell's tail is only asked for when its head is non-zero.
    """
    n_nt = grammar.n_nonterminals
    words = tuple(words)
    if not words:
        raise ValueError("sentence must have at least one word")

    def cell_of(symbols: tuple[int, ...], i: int, j: int) -> Cell:
        return (symbols[0], i, j) if len(symbols) == 1 else (symbols, i, j)

    def sym(s: int, i: int, j: int) -> CellProgram:
        total = zero
        for r in grammar.rules_of[s]:
            rhs = grammar.rule_rhs[r]
            if len(rhs) <= j - i:
                inner = yield cell_of(rhs, i, j)
                if inner != zero:
                    total = add(total, mul(rule_value(r), inner))
        return total

    def seq(symbols: tuple[int, ...], i: int, j: int) -> CellProgram:
        total = zero
        for m in range(i + 1, j - len(symbols) + 2):
            head = yield (symbols[0], i, m)
            if head != zero:
                tail = yield cell_of(symbols[1:], m, j)
                if tail != zero:
                    total = add(total, mul(head, tail))
        return total

    def program(cell: Cell) -> CellProgram:
        what, i, j = cell
        return seq(what, i, j) if isinstance(what, tuple) else sym(what, i, j)

    root: Cell = (grammar.start_id, 0, len(words))
    memo: dict[Cell, Any] = {}
    stack: list[tuple[Cell, CellProgram]] = [(root, program(root))]
    sent: Any = None
    while stack:
        cell, running = stack[-1]
        try:
            need = running.send(sent)
        except StopIteration as finished:
            stack.pop()
            memo[cell] = sent = finished.value
            continue
        what, i, j = need
        if need in memo:
            sent = memo[need]
        elif not isinstance(what, tuple) and what >= n_nt:  # a terminal covers exactly its own word
            sent = one if (j == i + 1 and words[i] == what - n_nt) else zero
        else:
            stack.append((need, program(need)))
            sent = None
    return memo[root]


def count_parses(grammar: Grammar, words: Sequence[int]) -> int:
    """``|T(x)|``, the number of parse trees of ``words`` from the start symbol (exact integer).

    Args:
        grammar: the grammar.
        words: the sentence as terminal ids (:meth:`Grammar.tokenize
            <tvolib.models.pcfg.grammar.Grammar.tokenize>`).

    Returns:
        The number of parses (0 if the grammar does not generate ``words``).

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> g = load_grammar("astronomers")
        >>> count_parses(g, g.tokenize("astronomers saw stars with ears"))
        2
    """
    return _span_chart(grammar, words, lambda r: 1, 0, 1, lambda a, b: a + b, lambda a, b: a * b)


def inside_log_marginal(grammar: Grammar, log_probs: Tensor | Sequence[float], words: Sequence[int]) -> float:
    """``log p(x) = log sum_{z in T(x)} prod_{r in z} p_r`` by the inside algorithm (float64).

    Args:
        grammar: the grammar.
        log_probs: ``(n_rules,)`` rule log-probabilities.
        words: the sentence as terminal ids.

    Returns:
        ``log p(x)``, ``-inf`` if ``x`` has no parse.
    """
    probs = torch.as_tensor(log_probs, dtype=torch.float64).detach().cpu().exp().tolist()
    total = _span_chart(grammar, words, lambda r: probs[r], 0.0, 1.0, lambda a, b: a + b, lambda a, b: a * b)
    return math.log(total) if total > 0 else float("-inf")


def enumerate_parses(grammar: Grammar, words: Sequence[int], max_parses: int = MAX_PARSES) -> list[tuple[int, ...]]:
    """All parses ``T(x)`` of ``words`` as left-most derivations (rule tuples), in a deterministic order.

    Args:
        grammar: the grammar.
        words: the sentence as terminal ids.
        max_parses: the most parses listed (:data:`MAX_PARSES` by default).

    Returns:
        The parses (an empty list if there is none).

    Raises:
        ValueError: if ``words`` has more than ``max_parses`` parses (they are counted first).
    """
    count = count_parses(grammar, words)
    if count > max_parses:
        raise ValueError(f"sentence of {len(words)} words has {count} parses > max_parses={max_parses}; "
                         f"use shorter evaluation sentences or raise max_parses")
    return _span_chart(grammar, words, lambda r: [(r,)], [], [()], lambda a, b: a + b,
                       lambda a, b: [x + y for x in a for y in b])
