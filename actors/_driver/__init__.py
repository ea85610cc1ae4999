"""The public API's implementation, run in the user's (driver's) process: Tuner, configs, results,
callbacks, the actor system's start and stop. The only place that wires everything together is
``tuner.py``.
"""
