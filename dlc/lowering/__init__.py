"""Lowerings between dlc's levels, one pass per file: lower-graph-to-tensor,
lower-tensor-to-loop, lower-loop-to-llvm (registered in `dlc.passes.get_all_passes`)."""
