"""`eagle-cycle inspect`: the caption of the stock by-batch-size table says how its gen tok/s is taken.

No-spec intervals are pooled as tokens over seconds (``DecodeBatchStats.plain_by_bs``: the harmonic
mean of the rates), like speculative ones; the caption had still called them "their mean".
"""

from __future__ import annotations

from sglang_eagle_cycle import cli


def _line(bs: int, tok_s: float, second: int) -> str:
    return (f"[2026-11-30 10:00:{second:02d} TP0] Decode batch, #running-req: {bs}, #token: 999, token usage: 0.01, "
            f"cuda graph: True, gen throughput (token/s): {tok_s:.2f}, #queue-req: 0")


def test_no_spec_caption_matches_the_pooling(tmp_path, capsys):
    # no-spec intervals at two batch sizes (the by-bs table shows with several); bs 1 at 100 and 300
    rates = [100.0, 300.0, 100.0, 300.0]
    lines = [_line(1, r, i) for i, r in enumerate(rates)] + [_line(2, 200.0, 10), _line(2, 200.0, 11)]
    log = tmp_path / "nospec.log"
    log.write_text("\n".join(lines) + "\n")
    rc = cli.main(["inspect", str(log)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0
    harmonic = len(rates) / sum(1 / r for r in rates)   # 150.0, not the plain mean 200.0
    assert f"{harmonic:.1f}" in out
    assert "no-spec ones their mean" not in out
    assert "no-spec ones likewise" in out
