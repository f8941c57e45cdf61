"""The tiny EAGLE-3 MLA head (``Eagle3DeepseekV2ForCausalLM``, the Kimi-K2.5 head) the SGLang-class
tests build on the CPU: 3 aux states of a 64-wide target into a 64-wide draft (``fc`` [64, 192]),
one decoder layer, a 128-token draft vocabulary."""

MLA = "Eagle3DeepseekV2ForCausalLM"

#: its config.json
CONFIG = {"architectures": [MLA], "model_type": "deepseek_v3", "hidden_size": 64,
          "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 1,
          "vocab_size": 256, "draft_vocab_size": 128, "q_lora_rank": 32, "kv_lora_rank": 32,
          "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "rms_norm_eps": 1e-6,
          "max_position_embeddings": 256, "rope_theta": 10000.0, "tie_word_embeddings": False,
          "target_hidden_size": 64, "hidden_act": "silu", "torch_dtype": "float32",
          "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}
