"""Training loops of the tiny pair: the target on text, the EAGLE-3 head on the target's states.

Deterministic for a seed on one machine and torch build: every random draw comes from a
``torch.Generator`` seeded from the pair's seed, the thread count is fixed while training, and
``torch.use_deterministic_algorithms`` is on.

The draft is trained the way SGLang serves it (``eagle_worker_v2`` draft-extend): at position
``t`` it reads the embedding of token ``t + 1`` and the target's aux states at ``t``, and is
taught the target's greedy token at ``t + 2`` (the target's argmax at ``t + 1``).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .models import Eagle3Head, TinyCausalLM


@dataclass(frozen=True)
class Schedule:
    """Optimiser schedule: AdamW, linear warm-up then cosine decay to ``floor * lr``."""

    steps: int
    batch: int
    seq: int
    lr: float
    warmup: int = 20
    floor: float = 0.1
    weight_decay: float = 0.0

    def factor(self, step: int) -> float:
        warm = min(1.0, (step + 1) / max(1, self.warmup))
        progress = step / max(1, self.steps)
        return warm * (self.floor + (1 - self.floor) * 0.5 * (1 + math.cos(math.pi * progress)))


@contextmanager
def deterministic(threads: int = 2):
    """Fixed thread count and deterministic kernels for the duration; restores both after."""
    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)


def windows(data: torch.Tensor, starts: torch.Tensor, length: int) -> torch.Tensor:
    """``[len(starts), length]`` slices of the 1-D token tensor ``data``."""
    return data[starts.unsqueeze(1) + torch.arange(length)]


def _optimiser(params, sched: Schedule):
    opt = torch.optim.AdamW(params, lr=sched.lr, betas=(0.9, 0.95), weight_decay=sched.weight_decay)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, sched.factor)


def _update(loss, module, opt, lr) -> float:
    """One optimiser step on ``loss`` (gradients clipped to norm 1); returns the loss value."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    lr.step()
    return loss.item()


def train_target(model: TinyCausalLM, data: torch.Tensor, sched: Schedule, gen: torch.Generator,
                 log=None) -> list[float]:
    """Next-token cross-entropy on random windows of ``data`` (1-D LongTensor). Returns losses."""
    opt, lr = _optimiser(model.parameters(), sched)
    losses = []
    model.train()
    for step in range(sched.steps):
        starts = torch.randint(0, data.numel() - sched.seq - 1, (sched.batch,), generator=gen)
        x = windows(data, starts, sched.seq + 1)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        losses.append(_update(loss, model, opt, lr))
        if log is not None and (step % 50 == 0 or step == sched.steps - 1):
            log(f"target step {step + 1}/{sched.steps} loss {loss.item():.3f}")
    model.eval()
    return losses


@torch.no_grad()
def target_features(model: TinyCausalLM, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """All residual positions and greedy tokens of teacher-forced sequences.

    tokens ``[B, L]`` -> (states ``[N + 1, B, L, hidden]``, greedy ``[B, L]``: the target's argmax
    at each position, i.e. its prediction of the next token).
    """
    states = model.states(tokens)
    greedy = model.logits_from_last(states[-1]).argmax(-1)
    return torch.stack(states), greedy


def aux_input(states: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """Concatenate states at ``positions`` (ascending, as SGLang captures them): ``[..., k*hidden]``."""
    return torch.cat([states[p] for p in sorted(positions)], dim=-1)


def draft_batch(embed: torch.nn.Embedding, tokens: torch.Tensor, aux: torch.Tensor,
                greedy: torch.Tensor):
    """SGLang's shift: position t gets embed(token t+1), aux(t), and the label greedy(t+1).

    tokens/greedy ``[B, L]``, aux ``[B, L, k*h]`` -> embeds ``[B, L-1, h]``, aux ``[B, L-1, k*h]``,
    labels ``[B, L-1]`` (target ids).
    """
    return embed(tokens[:, 1:]), aux[:, :-1], greedy[:, 1:]


def near_wirings(positions: list[int], num_layers: int) -> list[list[int]]:
    """The wrong wirings next to ``positions`` (sorted residual positions in ``0..num_layers``): the
    whole set moved by -2, -1, +1 or +2 layers, one position moved by one layer, and the embedding
    (position 0) in place of the deepest; each sorted, distinct, in range, and not ``positions``
    itself. These are the mistakes the wiring probe must tell apart (SGLang's +1 convention read
    the other way, an off-by-one id, the embedding fed as a state)."""
    own = sorted(positions)
    out: list[list[int]] = []

    def add(cand):
        cand = sorted(cand)
        if (len(set(cand)) == len(cand) and all(0 <= p <= num_layers for p in cand)
                and cand != own and cand not in out):
            out.append(cand)

    for by in (-2, -1, 1, 2):
        add([p + by for p in own])
    for i in range(len(own)):
        for by in (-1, 1):
            add(own[:i] + [own[i] + by] + own[i + 1:])
    add([0] + own[:-1])
    return out


def train_draft(head: Eagle3Head, embed: torch.nn.Embedding, tokens: torch.Tensor, aux: torch.Tensor,
                greedy: torch.Tensor, target_to_draft: torch.Tensor, sched: Schedule,
                gen: torch.Generator, log=None, decoys: list[torch.Tensor] | None = None,
                decoy_weight: float = 0.0) -> list[float]:
    """Cross-entropy on draft ids; labels outside the draft vocabulary are ignored.

    tokens/greedy ``[S, L]`` and aux ``[S, L, k*h]`` are precomputed target features of ``S``
    sequences; each step draws ``sched.batch`` of them. ``target_to_draft`` maps a target id to
    its draft id or -1.

    ``decoys``: aux inputs ``[S, L, k*h]`` of wrong wirings (:func:`near_wirings`). Each step one of
    them, in turn, is fed for the same rows and its output pushed toward the uniform distribution
    (``decoy_weight`` times the mean of ``logsumexp(z) - mean(z)``, the KL divergence from uniform
    up to a constant). A draft trained for minutes on an 8-layer model otherwise does nearly as well
    on a neighbouring layer's states as on its own (README: one point or two, and which wiring wins
    then moved with the CPU's kernels); a real draft's dependence on its layers is what the wiring
    checks exist for, and this makes the tiny pair's dependence plain on every machine.
    """
    opt, lr = _optimiser(head.parameters(), sched)
    losses = []
    head.train()
    with torch.no_grad():
        embeds_all, aux_all, labels_all = draft_batch(embed, tokens, aux, greedy)
        labels_all = target_to_draft[labels_all]
        decoys_all = [d[:, :-1] for d in (decoys or [])]
    for step in range(sched.steps):
        rows = torch.randint(0, tokens.shape[0], (sched.batch,), generator=gen)
        logits = head(embeds_all[rows], aux_all[rows])
        loss = F.cross_entropy(logits.flatten(0, 1), labels_all[rows].flatten(), ignore_index=-1)
        if decoys_all and decoy_weight > 0:
            wrong = head(embeds_all[rows], decoys_all[step % len(decoys_all)][rows])
            loss = loss + decoy_weight * (torch.logsumexp(wrong, -1) - wrong.mean(-1)).mean()
        losses.append(_update(loss, head, opt, lr))
        if log is not None and (step % 100 == 0 or step == sched.steps - 1):
            log(f"draft step {step + 1}/{sched.steps} loss {loss.item():.3f}")
    head.eval()
    return losses
