"""Training text every machine has offline, and the tokenizer trained on it.

The text is the source (code and docstrings) of a fixed list of pure-Python standard-library
modules, read from the running interpreter's own ``Lib/``. It differs between Python minor
versions, so the pair cache key includes the Python version.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from ..errors import UsageError

#: Vocabulary size of the tiny tokenizer.
VOCAB = 1024

#: Special token ids of the tiny tokenizer (first in its vocabulary).
EOS = "<|endoftext|>"

#: The eight fixed prompts whose greedy continuations are checked for degeneracy: definitions
#: that open a function or class of the training text (textwrap.py, the same in Python 3.11-3.13),
#: so a target that learned its text continues them instead of looping.
PROMPTS = (
    "class TextWrapper:", "    def _split(self, text):", "    def _wrap_chunks(self, chunks):",
    "def wrap(text, width=70, **kwargs):", "def fill(text, width=70, **kwargs):",
    "def shorten(text, width, **kwargs):", "def dedent(text):", "def indent(text, prefix, predicate=None):",
)


def module_text(modules: tuple[str, ...]) -> str:
    """The concatenated sources of ``modules`` (paths under ``Lib/``); UsageError when one is missing."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    parts = []
    for rel in modules:
        path = lib / rel
        try:
            parts.append(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"standard-library source {path} is not readable ({exc.strerror}); "
                             "make-tiny-pair trains on it") from None
    return "\n".join(parts)


def train_tokenizer(text: str, vocab: int):
    """A byte-level BPE ``tokenizers.Tokenizer`` with ``vocab`` entries (``EOS`` is id 0)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer=trainer)
    if tok.get_vocab_size() != vocab:
        raise RuntimeError(f"tokenizer has {tok.get_vocab_size()} entries, expected {vocab}")
    return tok


def tokenizer_files(tok, max_len: int) -> dict[str, str]:
    """File name -> text of the tokenizer files ``transformers`` and SGLang load offline."""
    import json

    eos = tok.token_to_id(EOS)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_len,
        "bos_token": EOS, "eos_token": EOS, "unk_token": EOS, "pad_token": EOS,
        "clean_up_tokenization_spaces": False, "add_bos_token": False, "add_eos_token": False,
        "added_tokens_decoder": {str(eos): {"content": EOS, "special": True, "lstrip": False,
                                            "rstrip": False, "normalized": False, "single_word": False}},
    }
    special = {"bos_token": EOS, "eos_token": EOS, "unk_token": EOS, "pad_token": EOS}
    return {
        "tokenizer.json": tok.to_str(pretty=False),
        "tokenizer_config.json": json.dumps(config, indent=2, sort_keys=True) + "\n",
        "special_tokens_map.json": json.dumps(special, indent=2, sort_keys=True) + "\n",
    }
