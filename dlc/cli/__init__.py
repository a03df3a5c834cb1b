"""dlc's command-line tools: `dlc-opt` (dlc_opt.py) and `dlc-run` (dlc_run.py)."""
