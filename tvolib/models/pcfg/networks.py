"""The PCFG's generative model ``p_theta(z)`` and its GRU inference network ``q_phi(z | x)``.

Following the paper's Appendix D.1 (Le et al. 2019, Section 4.1): ``p_theta(x, z) = l(x | z) p_theta(z)``
with ``p_theta(z) = prod_t theta[r_t | A_t]`` over the rules ``r_t`` of the left-most derivation of
``z`` (one learnable softmax per non-terminal ``A``) and ``l`` the soft likelihood of
:mod:`~tvolib.models.pcfg.likelihood`. Both distributions live on capped derivations
(:class:`~tvolib.models.pcfg.sampling.DerivationCap`).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from tvolib.models.pcfg.derivations import Derivations
from tvolib.models.pcfg.grammar import Grammar
from tvolib.models.pcfg.sampling import DerivationCap, resolve_cap, sample_from_table, sample_with_policy

__all__ = ["PCFG_INITS", "PCFGModel", "PCFGInferenceNetwork"]

PCFG_INITS = ("normal", "uniform", "true")


def _masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    return logits.masked_fill(~mask, float("-inf")).log_softmax(dim=-1)


class PCFGModel(nn.Module):
    """``p_theta(z) = prod_t softmax(logits)[r_t]`` over the rules of each expanded non-terminal.

    Args:
        grammar: the grammar.
        init: ``"normal"`` draws the logits from N(0, 1) (as Le et al.'s released code does),
            ``"uniform"`` sets them to 0, ``"true"`` starts at the grammar's probabilities.
        generator: the source of the ``"normal"`` draw.

    Example:
        >>> from tvolib.models.pcfg import load_grammar
        >>> model = PCFGModel(load_grammar("astronomers"), init="true")
        >>> d = model.sample(3, torch.Generator().manual_seed(0))
        >>> model.log_prior(d).shape
        torch.Size([3])
    """

    def __init__(self, grammar: Grammar, init: str = "normal", generator: torch.Generator | None = None) -> None:
        super().__init__()
        if init not in PCFG_INITS:
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
        """``(n_rules,)`` log-probability ``log theta[r | lhs(r)]`` of each rule."""
        return self.log_prob_table().gather(0, self.rule_lhs[None]).squeeze(0)

    def log_prior(self, derivations: Derivations) -> Tensor:
        """``log p_theta(z) = counts(z) @ log theta`` for each derivation, ``(n,)`` (differentiable in theta)."""
        return derivations.counts @ self.log_probs()

    def sample(self, n: int, generator: torch.Generator, max_productions: int | None = None, *,
               derivation_cap: DerivationCap | tuple[str, int] | None = None) -> Derivations:
        """``n`` capped derivations from ``p_theta`` (no gradient).

        Args:
            n: number of derivations.
            generator: the source of the uniforms.
            max_productions, derivation_cap: the cap, see :func:`~tvolib.models.pcfg.sampling.resolve_cap`
                (default ``productions=127``).

        Returns:
            The :class:`~tvolib.models.pcfg.derivations.Derivations`.
        """
        cap = resolve_cap(max_productions, derivation_cap)
        return sample_from_table(self.grammar, self.log_prob_table().detach(), n, generator, derivation_cap=cap)


class PCFGInferenceNetwork(nn.Module):
    """``q_phi(z | x)``: GRU sentence encoder + GRU derivation decoder (top-down, left-most).

    A bidirectional GRU reads the sentence; a GRU decoder emits the derivation rule by rule. Its
    input at step ``t`` is the non-terminal being expanded, the previous rule, and the encoder state
    at the next word still to be produced (the number of words already emitted is known from the
    derivation, so this pointer is deterministic). Rules of other non-terminals are masked, so
    ``log q(z | x) = sum_t log q(r_t | r_<t, x)`` is exact, under the same cap as ``p_theta``.

    Args:
        grammar: the grammar.
        hidden_dim: decoder size; the encoder has ``hidden_dim // 2`` units per direction
            (Le et al. use 100-unit GRUs).
        embed_dim: word, non-terminal and rule embedding size.
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
               max_productions: int | None = None, *,
               derivation_cap: DerivationCap | tuple[str, int] | None = None) -> tuple[Derivations, Tensor]:
        """``n_per`` derivations per sentence (rows sentence-major: row ``b * n_per + s``), no gradient.

        Args:
            tokens, lengths: the padded sentences (:func:`~tvolib.models.pcfg.derivations.encode_sentences`).
            n_per: derivations per sentence.
            generator: the source of the uniforms (on ``tokens``' device).
            max_productions, derivation_cap: the cap, see :func:`~tvolib.models.pcfg.sampling.resolve_cap`
                (default ``productions=127``).

        Returns:
            The derivations and the sampler's own ``log q`` (float64), equal to :meth:`log_prob` up
            to float rounding.
        """
        cap = resolve_cap(max_productions, derivation_cap)
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

        rules, log_q = sample_with_policy(self.grammar, len(rows), policy, generator, cap, tokens.device)
        return Derivations.build(self.grammar, rules, tokens.device), log_q

    def log_prob(self, derivations: Derivations, tokens: Tensor, lengths: Tensor, rows: Tensor) -> Tensor:
        """Exact ``log q(z_k | x_{rows[k]})`` by teacher forcing, ``(n,)``, differentiable in phi.

        Args:
            derivations: the trees ``z``.
            tokens, lengths: the padded sentences.
            rows: ``(n,)`` the sentence of each tree.

        Returns:
            ``(n,)`` log-probabilities.
        """
        memory, h0 = self.encode(tokens, lengths)
        x = self._inputs(memory[rows], lengths[rows], derivations.lhs, derivations.prev, derivations.pointer)
        out, _ = self.decoder(x, h0[rows][None].contiguous())
        logp = _masked_log_softmax(self.head(out), self.rule_mask[derivations.lhs])
        chosen = logp.gather(-1, derivations.steps[..., None]).squeeze(-1)
        return torch.where(derivations.step_mask, chosen, torch.zeros_like(chosen)).sum(1)
