"""The result of a tuning run: the table of gains per nest, and the plot of the best
GFLOP/s against trials (one curve per search, model-guided and random)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dlc.tuner.runner import NestResult


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


@dataclass
class TuneReport:
    entry: str
    db: str
    nests: list[NestResult]

    def table(self) -> str:
        """Per nest: default and best candidate's time of the function, their ratio
        (`*` when no candidate beat the policy's schedule: compiles keep it),
        failures, the trials each search needed to reach 95% of the best, and the
        transfer ρ."""
        head = (
            f"{'nest':<28} {'default':>11} {'best':>11} {'speedup':>8} {'trials':>7} "
            f"{'failed':>7} {'95% at':>14} {'rho':>6}"
        )
        lines = [head, "-" * len(head)]
        kept = False
        for nest in self.nests:
            best = nest.best()
            seconds = best.seconds if best else None
            ratio = f"{nest.default_seconds / seconds:.2f}x" if seconds else "-"
            if seconds is not None and seconds >= nest.default_seconds:
                ratio += "*"
                kept = True
            count = sum(len(run) for run in nest.trials.values())
            failed = sum(t.seconds is None for run in nest.trials.values() for t in run)
            reach = ", ".join(f"{s[0]}:{nest.trials_to(s) or '-'}" for s in nest.trials)
            rho = (
                "-"
                if nest.spearman is None or math.isnan(nest.spearman)
                else f"{nest.spearman:.2f}"
            )
            lines.append(
                f"{nest.summary:<28} {_ms(nest.default_seconds):>11} {_ms(seconds):>11} "
                f"{ratio:>8} {count:>7} {failed:>7} {reach:>14} {rho:>6}"
            )
        if kept:
            lines.append("* no candidate beat the default schedule: compiles keep the default")
        return "\n".join(lines)

    def plot(self, path: str) -> None:
        """A PNG: per nest, the best GFLOP/s so far against trials, per search."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        count = max(1, len(self.nests))
        fig, axes = plt.subplots(1, count, figsize=(5 * count, 3.6), squeeze=False)
        for ax, nest in zip(axes[0], self.nests, strict=False):
            for search in nest.trials:
                curve = nest.curve(search)
                ax.plot(range(1, len(curve) + 1), curve, label=f"{search} search")
            default = nest.flops / nest.default_seconds / 1e9
            ax.axhline(default, color="gray", linestyle="--", label="default schedule")
            ax.set_title(nest.summary)
            ax.set_xlabel("trials")
            ax.set_ylabel("best GFLOP/s (nest flops / function time)")
            ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
