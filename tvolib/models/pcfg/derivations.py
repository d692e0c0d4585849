"""Parse trees as left-most derivations, and the padded tensors the models read.

A parse tree ``z`` is stored as its left-most derivation: the rule indices in pre-order, each
expanding the left-most pending non-terminal. This is a bijection with trees. A derivation that
stopped early (see :class:`~tvolib.models.pcfg.sampling.DerivationCap`) is a prefix of one; its
pending symbols stay unexpanded and a pending non-terminal shows in the yield as
:attr:`Grammar.unk <tvolib.models.pcfg.grammar.Grammar.unk>`. A complete tree of a grammar in
Chomsky normal form with ``n`` words has ``2n - 1`` rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from tvolib.models.pcfg.grammar import Grammar

__all__ = ["replay_derivation", "encode_sentences", "Derivations"]


def replay_derivation(grammar: Grammar, rules: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """Replay a left-most derivation: ``(yield tokens, pointer per step, complete)``.

    ``pointer[t]`` is the number of words emitted before step ``t``. The yield of an incomplete
    (capped) derivation lists the pending symbols after the emitted words, a pending non-terminal
    as :attr:`Grammar.unk`.

    Args:
        grammar: the grammar whose rule indices ``rules`` are.
        rules: the derivation, rule indices in pre-order.

    Returns:
        The yield (terminal ids, ``unk`` for pending non-terminals), the pointer of each step, and
        whether the tree is complete.

    Raises:
        ValueError: if a rule does not expand the left-most pending non-terminal, or if rules
            follow a complete tree.

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> g = load_grammar("astronomers")  # rules 0: S -> NP VP, 5: NP -> stars, 7: VP -> V NP, ...
        >>> words, pointers, complete = replay_derivation(g, (0, 5, 7, 11, 3))
        >>> g.words(words), pointers, complete
        (['stars', 'saw', 'ears'], (0, 0, 1, 1, 2), True)
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
    """Pad token sequences to a batch.

    Args:
        sentences: non-empty token sequences (terminal ids).
        grammar: supplies the padding id :attr:`Grammar.pad`.
        device: where the tensors go.

    Returns:
        ``tokens (B, L)`` long, padded with ``grammar.pad``, and ``lengths (B,)`` long.
    """
    lengths = [len(s) for s in sentences]
    if not sentences or min(lengths) < 1:
        raise ValueError("sentences must be a non-empty list of non-empty token sequences")
    width = max(lengths)
    tokens = torch.tensor([list(s) + [grammar.pad] * (width - len(s)) for s in sentences], dtype=torch.long)
    return tokens.to(device), torch.tensor(lengths, dtype=torch.long, device=device)


@dataclass
class Derivations:
    """A batch of ``n`` (possibly capped) left-most derivations with the padded tensors the models need.

    ``rules`` are the Python tuples (hashable tree ids); tensors: ``steps``/``lhs``/``prev``/
    ``pointer``/``step_mask`` ``(n, T)`` (``prev`` is the previous rule + 1, 0 at the first step),
    ``counts`` ``(n, n_rules)`` rule-use counts (so ``log p_theta(z) = counts @ log theta``),
    ``yields``/``yield_len`` the (padded) yields, ``complete`` ``(n,)`` whether the tree finished
    within the cap.
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
        """Replay each derivation and pad the batch.

        Args:
            grammar: the grammar the rule indices refer to.
            rules: derivations, each a non-empty sequence of rule indices (see :func:`replay_derivation`).
            device: where the tensors go.

        Returns:
            The batch, in the order of ``rules``.
        """
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
