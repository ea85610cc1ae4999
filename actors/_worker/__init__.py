"""What runs inside a trial's process: the worker thread that runs the user's trainable, ``report()``,
and the capture of its output.
"""
