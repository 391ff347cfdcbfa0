"""`python3 -m experiments.paper`: make paper (experiments/paper/replay.py)."""

import sys

from experiments.paper.replay import main

sys.exit(main())
