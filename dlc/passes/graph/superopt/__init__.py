"""The graph superoptimizer's parts (TASO: Jia et al., SOSP 2019); the pass itself is
`dlc.passes.graph.superoptimize`.

- `terms.py`: the term language of substitutions (ops, symbolic shapes, evaluation);
- `axioms.py`: operator properties, each checked on random inputs before it is trusted;
- `prove.py`: z3 proofs of candidate substitutions from the trusted axioms;
- `library.py`: rules with their proof status, `rules.json` (written by
  `tools/gen_substitutions.py`), listed by `python -m dlc.passes.graph.superopt --list`;
- `graphs.py` / `emit.py`: a block as hash-consed nodes, and back;
- `search.py`: matching, applying, and the cost-based backtracking search;
- `cost.py`: the analytical cost model.
"""
