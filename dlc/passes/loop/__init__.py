"""Loop-level passes: memory planning and polynomial math functions on `loop` IR."""
