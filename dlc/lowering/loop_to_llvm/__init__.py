"""`lower-loop-to-llvm`: loops and buffers to xDSL's `llvm` dialect."""
