"""`lower-graph-to-loop`: graph functions with symbolic dimensions straight to loop nests over run-time extents."""
