"""Reverse-mode automatic differentiation, the machinery of the `differentiate` pass
(`dlc.passes.graph.differentiate`): the differentiator, the primal's paths, the
reverse sweep with the adjoint rules of each op family, and the tapes of calls."""
