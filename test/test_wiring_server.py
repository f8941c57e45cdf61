"""Issue 14 on the server path: SGLang's own ``load_plugins()``, the real ``Scheduler`` class and the real
family setters, in a fresh interpreter (HookRegistry cannot un-patch; test/sglang_fork.py).

Run as a script, this file is its own probe: ``python test_wiring_server.py ARGS_JSON`` prints one JSON
line. ``Scheduler.__init__`` is entered for real: our hook runs first; SGLang's own body is stopped at
its first step (``init_startup_timing_begin``, replaced by a stand-in that raises ``ReachedSGLang``),
so "the launch went on" is observable without a GPU.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

KIMI_TARGET = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
               "hidden_size": 7168, "vocab_size": 163840, "max_position_embeddings": 131072}
EAGLE3_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168, "vocab_size": 163840,
                "num_hidden_layers": 1, "max_position_embeddings": 2048,
                "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}


# --------------------------------------------------------------------------- the probe (child side)

class ReachedSGLang(Exception):
    """Raised by the stand-in for SGLang's first ``Scheduler.__init__`` step."""


def _probe(args: dict) -> dict:
    import io
    import logging
    from types import SimpleNamespace

    log = io.StringIO()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s", stream=log)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.test.test_utils import published_topology

    def first_step(self, *a, **k):
        raise ReachedSGLang()

    Scheduler.init_startup_timing_begin = first_step  # below the hooked __init__: the hook still runs
    out: dict = {}

    def launch(name, env=None, **fields):
        for key, value in (env or {}).items():
            os.environ[key] = value
        mark = log.tell()
        try:
            with published_topology(**fields) as server_args:
                Scheduler(server_args, SimpleNamespace(nccl_port=0))
            result = {"error": None}
        except ReachedSGLang:
            result = {"error": "ReachedSGLang"}
        except Exception as exc:
            result = {"error": type(exc).__name__, "message": str(exc)}
        for key in env or {}:
            del os.environ[key]
        result["log"] = log.getvalue()[mark:]
        out[name] = result

    drafts = args["drafts"]
    launch("eagle", speculative_algorithm="EAGLE", speculative_draft_model_path=drafts["eagle3"])
    launch("nextn", speculative_algorithm="NEXTN", speculative_draft_model_path=drafts["eagle3"])
    launch("eagle_not_strict", env={"SGLANG_EAGLE_CYCLE_WIRING_STRICT": "0"}, speculative_algorithm="EAGLE",
           speculative_draft_model_path=drafts["eagle3"])
    launch("eagle3", speculative_algorithm="EAGLE3", speculative_draft_model_path=drafts["eagle3"])
    launch("aux_off", speculative_algorithm="EAGLE3", speculative_draft_model_path=drafts["aux_off"])
    launch("wiring_off", env={"SGLANG_EAGLE_CYCLE_WIRING": "0"}, speculative_algorithm="EAGLE",
           speculative_draft_model_path=drafts["eagle3"])

    # the real DeepSeek-V3 setter under EAGLE3: the note and the variant are logged once at start-up
    sys.path.insert(0, str(HERE))
    from plugin_probe import call_setters

    with published_topology(speculative_algorithm="EAGLE3", speculative_draft_model_path=drafts["small"],
                            context_length=131072):
        mark = log.tell()
        out["setter"] = call_setters([["deepseek_v2", "DeepseekV3ForCausalLM", 61, [1, 29, 57]]])
        out["setter_log"] = log.getvalue()[mark:]
    # a Kimi-K2.5 MLA head whose final norm is stored as model.norm.weight (which that class skips), and
    # the same checkpoint as a Llama head (which loads it)
    # an fc.weight stored fp8 with its scale: the Llama head and the MLA head without a quantisation config
    # cast it into a float fc and drop the scale; the MLA head with its fp8 quantization_config loads both
    # a draft saved as pytorch_model.bin (no safetensors) whose fc takes two aux states, not three
    # one whose tensors sit in a nested dict (SGLang would load none of them), one in the pre-1.6 format
    for name in ("mla_prefixed", "llama_prefixed", "llama_fp8", "mla_fp8", "mla_fp8_quant", "llama_bin_narrow",
                 "llama_bin_nested", "llama_bin_legacy"):
        with published_topology(speculative_algorithm="EAGLE3", speculative_draft_model_path=drafts[name]):
            mark = log.tell()
            out[name] = call_setters([["deepseek_v2", "DeepseekV3ForCausalLM", 61, [1, 29, 57]]])[0]
            out[name]["log"] = log.getvalue()[mark:]

    # an internal fault in the precheck: logged once, SGLang's path continues (twice: still one log)
    import sglang_eagle_cycle.wiring as w

    def boom(*a, **k):
        raise KeyError("injected")

    w.capture_problems = boom
    launch("fault1", speculative_algorithm="EAGLE", speculative_draft_model_path=drafts["eagle3"])
    launch("fault2", speculative_algorithm="EAGLE", speculative_draft_model_path=drafts["eagle3"])
    return out


# --------------------------------------------------------------------------- the tests

if __name__ != "__main__":
    import pytest

    pytest.importorskip("sglang")

    @pytest.fixture(scope="module")
    def server(tmp_path_factory):
        from sglang_fork import run_python

        root = tmp_path_factory.mktemp("wiring_server")
        drafts = {}
        for name, cfg, fc in (
            ("eagle3", EAGLE3_DRAFT, [7168, 21504]),
            ("aux_off", {**EAGLE3_DRAFT, "eagle_config": {**EAGLE3_DRAFT["eagle_config"],
                                                          "use_aux_hidden_state": False}}, [7168, 21504]),
            # for plugin_probe's stand-in target (hidden 64, no vocab)
            ("small", {**EAGLE3_DRAFT, "hidden_size": 64, "vocab_size": None}, [64, 192]),
            ("mla_prefixed", {**EAGLE3_DRAFT, "architectures": ["Eagle3DeepseekV2ForCausalLM"], "hidden_size": 64,
                              "vocab_size": None}, [64, 192]),
            ("llama_prefixed", {**EAGLE3_DRAFT, "hidden_size": 64, "vocab_size": None}, [64, 192]),
            ("llama_fp8", {**EAGLE3_DRAFT, "hidden_size": 64, "vocab_size": None}, [64, 192]),
            ("mla_fp8", {**EAGLE3_DRAFT, "architectures": ["Eagle3DeepseekV2ForCausalLM"], "hidden_size": 64,
                         "vocab_size": None}, [64, 192]),
            ("mla_fp8_quant", {**EAGLE3_DRAFT, "architectures": ["Eagle3DeepseekV2ForCausalLM"], "hidden_size": 64,
                               "vocab_size": None, "quantization_config": {
                                   "quant_method": "fp8", "activation_scheme": "dynamic",
                                   "weight_block_size": [32, 32]}}, [64, 192]),
            ("llama_bin_narrow", {**EAGLE3_DRAFT, "hidden_size": 64, "vocab_size": None}, [64, 128]),
            ("llama_bin_nested", {**EAGLE3_DRAFT, "hidden_size": 64, "vocab_size": None}, [64, 192]),
            ("llama_bin_legacy", {**EAGLE3_DRAFT, "hidden_size": 64, "vocab_size": None}, [64, 128]),
        ):
            d = root / name
            d.mkdir()
            (d / "config.json").write_text(json.dumps(cfg))
            from conftest import write_safetensors_header

            extra = {"model.norm.weight": [64]} if name.endswith("_prefixed") else {}
            dtypes = {}
            if "_fp8" in name:
                extra, dtypes = {"fc.weight_scale_inv": [2, 6]}, {"fc.weight": "F8_E4M3", "fc.weight_scale_inv": "F32"}
            if name.endswith("_bin_narrow"):
                import torch
                torch.save({"fc.weight": torch.zeros(fc)}, d / "pytorch_model.bin")
            elif name.endswith("_bin_nested"):
                import torch
                torch.save({"state_dict": {"fc.weight": torch.zeros(fc)}}, d / "pytorch_model.bin")
            elif name.endswith("_bin_legacy"):   # a narrow fc the server does not read: the launch goes on
                import torch
                torch.save({"fc.weight": torch.zeros(fc)}, d / "pytorch_model.bin", _use_new_zipfile_serialization=False)
            else:
                write_safetensors_header(d / "model.safetensors", {"fc.weight": fc, **extra}, dtypes)
            drafts[name] = str(d)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_EAGLE_CYCLE")}
        env.update({"SGLANG_PLUGINS": "eagle_cycle"})
        proc = run_python([Path(__file__), json.dumps({"drafts": drafts})], env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    @pytest.mark.parametrize("name", ["eagle", "nextn"])
    def test_eagle3_head_under_eagle_stops_the_launch(server, name):
        got = server[name]
        assert got["error"] == "EagleWiringError", got  # before SGLang's own __init__ body ran
        msg = got["message"]
        assert msg.startswith("EAGLE-3 aux wiring error: [algorithm_not_eagle3]")
        assert "--speculative-algorithm EAGLE3" in msg and "SGLANG_EAGLE_CYCLE_WIRING_STRICT=0" in msg
        assert msg in got["log"]  # logged once as an ERROR too
        assert got["log"].count("algorithm_not_eagle3") == 1

    def test_not_strict_logs_and_the_launch_goes_on(server):
        got = server["eagle_not_strict"]
        assert got["error"] == "ReachedSGLang"
        assert got["log"].count("EAGLE-3 aux wiring error [algorithm_not_eagle3] (serving anyway, "
                                "SGLANG_EAGLE_CYCLE_WIRING_STRICT=0)") == 1

    def test_eagle3_and_wiring_off_are_left_alone(server):
        for name in ("eagle3", "wiring_off"):
            assert server[name] == {"error": "ReachedSGLang", "log": ""}, name

    def test_use_aux_hidden_state_false_stops_the_launch(server):
        got = server["aux_off"]
        assert got["error"] == "EagleWiringError" and "[aux_capture_off_fc_mismatch]" in got["message"]
        assert "21504" in got["message"]

    def test_setter_logs_the_note_and_the_variant_once(server):
        assert server["setter"][0].get("layers_to_capture") == [2, 30, 58], server["setter"]
        log = server["setter_log"]
        assert log.count("INFO sglang_eagle_cycle EAGLE-3 aux wiring note [draft_context_shorter]: ") == 1
        assert "2048" in log and "131072" in log and "WARNING sglang_eagle_cycle" not in log
        assert log.count("EAGLE-3 draft variant: LlamaForCausalLMEagle3 (plain EAGLE-3") == 1

    def test_a_tensor_the_mla_head_skips_stops_the_launch_at_the_setter(server):
        """The startup check reads the draft's header as the CLI does: model.norm.weight, which
        Eagle3DeepseekV2ForCausalLM skips, stops the launch (weight_not_loaded); the Llama head loads it."""
        got = server["mla_prefixed"]
        assert got["error"] == "EagleWiringError", got
        assert got["message"].startswith("EAGLE-3 aux wiring error: [weight_not_loaded] the draft checkpoint "
                                         "stores model.norm.weight only under the model. prefix")
        assert server["llama_prefixed"].get("layers_to_capture") == [2, 30, 58], server["llama_prefixed"]

    def test_an_fp8_fc_whose_scale_sglang_drops_stops_the_launch_at_the_setter(server):
        """fc.weight stored F8_E4M3 with fc.weight_scale_inv, read from the draft's header at start-up as the
        CLI reads it: the Llama head, and the MLA head without a quantisation config, stop the launch
        (fc_scale_dropped); the MLA head with its fp8 quantization_config goes on."""
        for name, arch in (("llama_fp8", "LlamaForCausalLMEagle3"), ("mla_fp8", "Eagle3DeepseekV2ForCausalLM")):
            got = server[name]
            assert got["error"] == "EagleWiringError", (name, got)
            assert got["message"].startswith(
                f"EAGLE-3 aux wiring error: [fc_scale_dropped] the draft checkpoint stores fc.weight as F8_E4M3 "
                f"with its scale fc.weight_scale_inv: SGLang 0.5.23's {arch} builds fc"), got["message"]
        assert server["mla_fp8_quant"].get("layers_to_capture") == [2, 30, 58], server["mla_fp8_quant"]

    def test_a_pytorch_model_bin_draft_is_checked_at_the_setter(server):
        """A draft with no safetensors, only pytorch_model.bin (as SGLang's default loader falls back to):
        its fc.weight shape is read at start-up as the CLI reads it, and an fc that takes two aux states
        where three are captured stops the launch (fc_width_mismatch)."""
        got = server["llama_bin_narrow"]
        assert got["error"] == "EagleWiringError", got
        assert got["message"].startswith("EAGLE-3 aux wiring error: [fc_width_mismatch] 3 aux hidden states x 64 "
                                         "= 192 != fc.weight in_features 128"), got["message"]

    def test_a_bin_whose_tensors_sglang_would_skip_stops_the_launch(server):
        """A pytorch_model.bin whose tensors sit under "state_dict": SGLang would load none of them and
        serve an uninitialised draft, silently; the start-up check stops the launch (checkpoint_nested)."""
        got = server["llama_bin_nested"]
        assert got["error"] == "EagleWiringError", got
        assert got["message"].startswith("EAGLE-3 aux wiring error: [checkpoint_nested] the draft checkpoint keeps "
                                         "its tensors in a nested dict (pytorch_model.bin['state_dict'])"), got
        assert "not read" not in got["log"] and "not read" not in server["llama_bin_narrow"]["log"]

    def test_an_unreadable_draft_checkpoint_is_logged_and_the_launch_goes_on(server):
        """A pytorch_model.bin in PyTorch's pre-1.6 format: the start-up check, run in every TP rank, does
        not load it to read its shapes; it says so once, with the reason, and checks the rest."""
        got = server["llama_bin_legacy"]
        assert got.get("layers_to_capture") == [2, 30, 58], got
        assert got["log"].count("the draft checkpoint's tensor shapes were not read") == 1, got["log"]
        assert "pre-1.6 format" in got["log"]

    def test_fault_in_the_precheck_is_logged_once_and_sglang_goes_on(server):
        assert server["fault1"]["error"] == server["fault2"]["error"] == "ReachedSGLang"
        both = server["fault1"]["log"] + server["fault2"]["log"]
        assert both.count("internal error in wiring precheck (KeyError") == 1


if __name__ == "__main__":
    print(json.dumps(_probe(json.loads(sys.argv[1]))))
