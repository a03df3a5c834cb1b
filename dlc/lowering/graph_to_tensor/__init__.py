"""`lower-graph-to-tensor`: graph ops to `tensor.compute` index expressions."""
