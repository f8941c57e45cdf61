"""Draft/target agreement: the one definition used by make-tiny-pair, the CPU proofs and the probe.

Definition (issue 11):

1. the target generates ``gen_tokens`` greedy tokens after each held-out prompt;
2. the draft is teacher-forced over prompt + generation with SGLang's shift (position ``t`` reads
   the embedding of token ``t + 1`` and the aux states at ``t``);
3. only the positions whose predicted token (``t + 2``) is a generated token are scored: the
   draft's top-1, mapped to a target id through ``d2t``, against the target's greedy token.

A target token outside the draft vocabulary counts as a miss, as it does when serving.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .models import Eagle3Head, TinyCausalLM
from .train import aux_input


@dataclass
class Scored:
    """Teacher-forced features of the generated sequences, ready to score.

    ``states`` ``[N + 1, B, L, h]``, ``tokens`` ``[B, L]`` (prompt + generation), ``labels``
    ``[B, L - 1]`` (target greedy id of token ``t + 2`` for draft position ``t``), ``mask``
    ``[B, L - 1]`` (True where ``t + 2`` is a generated token).
    """

    states: torch.Tensor
    tokens: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor


@torch.no_grad()
def greedy_generate(model: TinyCausalLM, prompts: torch.Tensor, n: int) -> torch.Tensor:
    """Append ``n`` greedy tokens to each prompt: ``[B, P]`` -> ``[B, P + n]`` (no KV cache)."""
    x = prompts
    for _ in range(n):
        x = torch.cat([x, model(x)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return x


def scored_mask(batch: int, length: int, prompt: int, device=None) -> torch.Tensor:
    """``[batch, length - 1]`` bool: True at draft row ``t`` when the token it predicts, ``t + 2``, is a
    generated one (sequences of ``length`` tokens whose first ``prompt`` are the prompt)."""
    t = torch.arange(length - 1, device=device)
    return ((t + 2 >= prompt) & (t + 2 < length)).expand(batch, length - 1)


@torch.no_grad()
def score_features(model: TinyCausalLM, prompts: torch.Tensor, n: int) -> Scored:
    seqs = greedy_generate(model, prompts, n)
    states = torch.stack(model.states(seqs))
    greedy = model.logits_from_last(states[-1]).argmax(-1)
    mask = scored_mask(seqs.shape[0], seqs.shape[1], prompts.shape[1], seqs.device)
    return Scored(states=states, tokens=seqs, labels=greedy[:, 1:], mask=mask)


@torch.no_grad()
def draft_top1(head: Eagle3Head, embed: torch.nn.Embedding, tokens: torch.Tensor,
               aux: torch.Tensor) -> torch.Tensor:
    """Target ids of the draft's top-1 at each position ``t`` of ``[B, L - 1]`` (SGLang's shift)."""
    logits = head(embed(tokens[:, 1:]), aux[:, :-1])
    return head.draft_to_target[logits.argmax(-1)]


def agreement(head: Eagle3Head, embed: torch.nn.Embedding, sc: Scored, positions: list[int] | None) -> float:
    """Top-1 agreement in [0, 1] with the states at ``positions`` (``None``: aux zeroed)."""
    if positions is None:
        width = head.fc.in_features
        aux = torch.zeros(*sc.tokens.shape, width, device=sc.tokens.device)
    else:
        aux = aux_input(sc.states, positions)
    hit = (draft_top1(head, embed, sc.tokens, aux) == sc.labels) & sc.mask
    return hit.sum().item() / sc.mask.sum().item()


def majority(sc: Scored) -> float:
    """Share of scored positions whose target token is the most frequent one (a constant guess)."""
    labels = sc.labels[sc.mask]
    return torch.bincount(labels).max().item() / labels.numel()


def shifted(positions: list[int], by: int, num_layers: int) -> list[int] | None:
    """Positions moved by ``by`` layers, or None when one leaves ``0..N``."""
    moved = [p + by for p in positions]
    return moved if all(0 <= p <= num_layers for p in moved) else None


def distinct_counts(model: TinyCausalLM, prompt_ids: list[list[int]], n: int) -> list[int]:
    """Distinct tokens in each prompt's ``n``-token greedy continuation."""
    out = []
    for ids in prompt_ids:
        seq = greedy_generate(model, torch.tensor([ids]), n)[0, len(ids):]
        out.append(len(set(seq.tolist())))
    return out
