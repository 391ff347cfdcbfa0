"""`make paper`: the MRC paper's section-5 experiments as rows (rows.py), replayed on the
fabric of each row's shape or the one given (replay.py) and judged (judge.py, pure)."""
