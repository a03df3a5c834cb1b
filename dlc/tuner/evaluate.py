"""How well the cost model ranks candidates it did not train on, from a database alone
(`dlc-tune --evaluate --db tune.jsonl`): per workload of this CPU with enough measured
records,

- **transfer ρ**: Spearman's ρ between the scores of a model trained on every *other*
  workload's records and the measured speed (1 / seconds) of this workload's records;
- **online ρ**: the same for a model trained on all other records plus the first half
  (in measurement order) of this workload's, on its second half.

A model trains on records of one kind (contractions, or groups: feature vectors of
one length, `training_features`), so "every other workload" is every other of its kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlc.passes.tensor.schedule_records import Record, TuningDatabase
from dlc.tuner.features import training_features
from dlc.tuner.model import CostModel, spearman

MIN_RECORDS = 8


@dataclass(frozen=True)
class Evaluation:
    key: str
    nest: str
    records: int
    transfer: float | None
    online: float | None


Rows = list[tuple[list[float], float | None]]


def _rows(records: list[tuple[list[float], Record]]) -> Rows:
    return [(f, r.seconds if r.ok else None) for f, r in records]


def _rho(model: CostModel, held_out: list[tuple[list[float], Record]]) -> float | None:
    measured = [(f, r) for f, r in held_out if r.ok and r.seconds]
    if not model.trained or len(measured) < 3:
        return None
    scores = model.predict([f for f, _ in measured])
    return spearman(list(scores), [1.0 / r.seconds for _, r in measured])  # type: ignore[operator]


def evaluate(path: str, target: str, seed: int = 0) -> list[Evaluation]:
    """Transfer and online ρ per workload of `target` in the database at `path`."""
    db = TuningDatabase.load(path)
    by_key: dict[str, list[tuple[list[float], Record]]] = {}
    for r in db.all_records:
        feats = training_features(r)
        if r.target == target and feats:
            by_key.setdefault(r.key, []).append((feats, r))
    out: list[Evaluation] = []
    for key, records in by_key.items():
        if sum(r.ok for _, r in records) < MIN_RECORDS:
            continue
        length = len(records[0][0])
        others = {
            k: _rows([(f, r) for f, r in rs if len(f) == length])
            for k, rs in by_key.items()
            if k != key
        }
        transfer = CostModel(seed)
        transfer.fit(others)
        half = len(records) // 2
        online = CostModel(seed)
        online.fit({**others, key: _rows(records[:half])})
        out.append(
            Evaluation(
                key,
                records[0][1].nest,
                len(records),
                _rho(transfer, records),
                _rho(online, records[half:]),
            )
        )
    return out


def evaluation_table(rows: list[Evaluation]) -> str:
    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    lines = [f"{'nest':<28} {'records':>8} {'transfer rho':>13} {'online rho':>11}"]
    lines += [
        f"{e.nest:<28} {e.records:>8} {fmt(e.transfer):>13} {fmt(e.online):>11}" for e in rows
    ]
    return "\n".join(lines)
