"""The engine's pure core: the trial table, the decision reducer, placement, the scheduler host and
the experiment core. Nothing here imports Thespian, fsspec, threading or time (tests/test_architecture.py).
"""
