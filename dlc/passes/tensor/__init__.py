"""Tensor-level passes: fusion and scheduling of `tensor.compute` nests."""
