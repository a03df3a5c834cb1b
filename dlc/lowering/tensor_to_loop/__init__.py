"""`lower-tensor-to-loop`: `tensor.compute` nests to loops over buffers, as their schedules say."""
