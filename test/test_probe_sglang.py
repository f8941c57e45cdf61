"""The probe's draft forward is SGLang's: logits of SGLang 0.5.23's ``LlamaForCausalLMEagle3``
against :meth:`sglang_eagle_cycle.wiring.probe.Draft.logits` (issue 15, item 2), fp32 on CPU.

test/draft_forward_equality.py runs in its own interpreter (SGLang's CPU setup): random-weight
heads of every variant SGLang reads (``norm_before_fc`` in ``eagle_config`` or top level,
``fc_norm``, legacy ``use_aux_norm`` with ``aux_norm_*``/``midlayer`` names, both norms,
``norm_output``, a target wider than the draft, two aux states, a full vocabulary without
``d2t``) and the suite's two trained tiny-pair drafts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tiny_pairs
from conftest import computed_once
from sglang_fork import run_python

HERE = Path(__file__).resolve().parent
TOL = 1e-4


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    def compute():
        drafts = [str(tiny_pairs.pair(name)[0] / "draft") for name in ("llama", "deepseek_v3")]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_EAGLE_CYCLE", "SGLANG_PLUGINS"))}
        # forked from the CPU-engine server: SGLang imported after its CPU setup's first steps
        proc = run_python([HERE / "draft_forward_equality.py", tmp_path_factory.mktemp("heads"), *drafts],
                          env=env, timeout=600, cpu_engine=True)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])
    return computed_once(tmp_path_factory, "draft_forward_equality", compute)


EXPECTED_VARIANT = {
    "plain": [], "norm_before_fc_in_eagle_config": ["norm_before_fc"], "norm_before_fc_top_level": ["norm_before_fc"],
    "fc_norm": ["fc_norm"], "use_aux_norm_legacy_names": ["fc_norm"],
    "norm_before_fc_and_fc_norm": ["norm_before_fc", "fc_norm"], "norm_output": ["norm_output"],
    "wider_target_fc_norm": ["fc_norm"], "two_aux_states": ["fc_norm"], "full_vocab_no_d2t": [],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_VARIANT))
def test_random_head_logits_equal_sglangs(compared, name):
    r = compared["random"][name]
    assert r["nan_left"] == []                     # SGLang loaded every parameter from the checkpoint
    assert r["variant"] == EXPECTED_VARIANT[name]  # the probe read the variant SGLang reads
    assert r["logit_scale"] > 1.0                  # logits large enough for a wrong norm to show
    assert r["max_abs_diff"] <= TOL, r
    assert r["top1_equal"] == 1.0


def test_every_variant_was_compared(compared):
    assert sorted(compared["random"]) == sorted(EXPECTED_VARIANT)


def test_trained_pair_drafts_logits_equal_sglangs(compared):
    assert len(compared["pairs"]) == 2
    for draft, r in compared["pairs"].items():
        assert r["nan_left"] == [] and r["variant"] == [], draft
        assert r["max_abs_diff"] <= TOL * max(1.0, r["logit_scale"]), (draft, r)
        assert r["top1_equal"] == 1.0, draft
