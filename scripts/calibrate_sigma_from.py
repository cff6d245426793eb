"""Size and power of ``ablate table --sigma-from`` on real seeds, over many draws of the borrowed seeds.

``ablate calibrate SOURCE --sigma-from OTHER`` measures the test for one borrowed set of seeds, whose σ
came out where it came out (results/calibration-cpu: 0.70; results/calibration-cpu-17-32: 0.87), so its
false-positive rate is that draw's (the exact test's band for one draw is 0-16%). This script averages over
the draw: it pools the 32 seeds of one configuration (results/calibration-cpu + results/calibration-cpu-17-32),
and ``--splits`` times lends a random half (``--lend`` seeds) as the ``--sigma-from`` source and relabels
``--tables`` random R x K tables (distinct seed values, each row against the first, Holm over them) from the
other half, tested as ``ablate table`` tests them (:func:`ablate.report.stats.compare_scores`), with and
without the lent seeds, and with +1 / +2 / +3 BLEU added to row 1 for power. Beside it, the same procedure on
as many simulated N(0, σ) seeds with no test-set variance: where an exactly sized test lands::

    python scripts/calibrate_sigma_from.py --design 2x2 --splits 40 --tables 100

Deterministic (``--seed``); about 4 CPU-minutes with these settings.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ablate.report.calibration import relabelled
from ablate.report.stats import BorrowedNoise, SplitScores, compare_scores, load_pooled, split_scores

SHIFTS = (0.0, 1.0, 2.0, 3.0)


def rates(scores: SplitScores, rows: int, k: int, lend: int, splits: int, tables: int, alpha: float, seed: int):
    """``{"own"|"lent": [rate at each of SHIFTS]}``: the fraction of tables whose row 1 is marked (Holm)."""
    rng = np.random.default_rng(seed)
    bleu, boot = np.array(scores.bleu["base"]), scores.boot["base"]
    plan = [("r0", f"r{i}") for i in range(1, rows)]
    hits = {"own": np.zeros(len(SHIFTS)), "lent": np.zeros(len(SHIFTS))}
    for _ in range(splits):
        order = rng.permutation(len(bleu))
        lent, kept = order[:lend], order[lend:]
        other = BorrowedNoise("lent half", lend, float(np.sum((bleu[lent] - bleu[lent].mean()) ** 2)))
        for name, borrowed in (("own", None), ("lent", other)):
            half = SplitScores.of_values(
                scores.split, {"base": list(bleu[kept])}, {"base": [boot[i] for i in kept]},
                {"base": [str(i) for i in kept]}, borrowed,
            )  # fmt: skip
            table_rng = np.random.default_rng(rng.integers(1 << 32))
            for _ in range(tables):
                picks = table_rng.permutation(len(kept))[: rows * k].reshape(rows, k)
                for j, shift in enumerate(SHIFTS):
                    found = compare_scores([relabelled(half, "base", picks, False, (0.0, shift))], plan)
                    hits[name][j] += found[0].significant(alpha)
    return {name: (h / (splits * tables)).tolist() for name, h in hits.items()}


def simulated(n: int, sigma: float, samples: int = 8) -> SplitScores:
    """``n`` N(0, σ) seeds of one configuration with no test-set variance (constant bootstrap scores)."""
    x = np.random.default_rng(12345).normal(0.0, sigma, n)
    return SplitScores.of_values("simulated", {"base": list(x)}, {"base": [np.full(samples, v) for v in x]},
                                 {"base": [str(i) for i in range(n)]})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="*", default=["results/calibration-cpu", "results/calibration-cpu-17-32"])
    parser.add_argument("--design", default="2x2", help="RxK: rows x seeds per row")
    parser.add_argument("--lend", type=int, default=16, help="seeds lent as the --sigma-from source per split")
    parser.add_argument("--splits", type=int, default=40)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=20261206)
    args = parser.parse_args()
    rows, k = (int(x) for x in args.design.lower().split("x"))
    start = time.process_time()
    (scores,) = split_scores(load_pooled(args.sources), 2000, "bs").values()
    sigma = float(np.std(scores.bleu["base"], ddof=1))
    real = rates(scores, rows, k, args.lend, args.splits, args.tables, args.alpha, args.seed)
    normal = rates(simulated(len(scores.bleu["base"]), sigma), rows, k, args.lend, args.splits, args.tables,
                   args.alpha, args.seed)  # fmt: skip
    n = args.splits * args.tables
    print(f"{len(scores.bleu['base'])} seeds of {' + '.join(args.sources)} (σ {sigma:.2f} BLEU), split "
          f"{scores.split}; {args.splits} random halves lent as --sigma-from ({args.lend} seeds), {args.tables} "
          f"random {rows}x{k} tables (distinct seeds) of the rest each: {n:,} tables, alpha {args.alpha:g}, Holm "
          f"over {rows - 1} comparison(s)\n")  # fmt: skip
    print("| seeds | seed σ | row 1 marked † (a false positive) | power at +1 / +2 / +3 BLEU |")
    print("| :-- | :-- | --: | :-: |")
    for label, found in (("real", real), (f"simulated N(0, {sigma:.2f})", normal)):
        for name in ("own", "lent"):
            fit = (
                f"within-row ({rows * (k - 1)} df)"
                if name == "own"
                else f"+ lent ({rows * (k - 1) + args.lend - 1} df)"
            )
            power = " / ".join(f"{p:.0%}" for p in found[name][1:])
            print(f"| {label} | {fit} | {found[name][0]:.1%} | {power} |")
    print(f"\n{time.process_time() - start:.0f} CPU-s")


if __name__ == "__main__":
    main()
