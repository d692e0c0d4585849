"""Fixtures shared by the PCFG model tests."""
from __future__ import annotations

from typing import Callable

import pytest
import torch

from tvolib.models.pcfg import Grammar, PCFGModel, load_grammar


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """The PCFG's small sequential ops run fastest (and most reproducibly) on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def grammar() -> Grammar:
    return load_grammar("astronomers")


@pytest.fixture(scope="session")
def true_table(grammar) -> torch.Tensor:
    """The true rule log-probabilities as a ``(n_nonterminals, n_rules)`` table."""
    return PCFGModel(grammar, init="true").log_prob_table().detach()


@pytest.fixture(scope="session")
def capped_derivations() -> Callable[[Grammar, int], list[tuple[int, ...]]]:
    """Every derivation that is complete within ``budget`` rules or has exactly ``budget`` rules."""

    def enumerate_capped(grammar: Grammar, budget: int) -> list[tuple[int, ...]]:
        out, frontier = [], [((), [grammar.start_id])]
        while frontier:
            rules, stack = frontier.pop()
            for r in grammar.rules_of[stack[-1]]:
                new = stack[:-1] + list(reversed(grammar.rule_rhs[r]))
                while new and new[-1] >= grammar.n_nonterminals:
                    new.pop()
                if not new or len(rules) + 1 == budget:
                    out.append(rules + (r,))
                else:
                    frontier.append((rules + (r,), new))
        return out

    return enumerate_capped
