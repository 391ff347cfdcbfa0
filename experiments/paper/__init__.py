"""`make paper`: the MRC paper's section-5 experiments as rows (rows.py), replayed on
one network (replay.py) and judged (judge.py, pure)."""
