"""Graph-level passes: optimization, differentiation and verification of `graph` IR, one pass per file."""
