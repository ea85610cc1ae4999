"""A trial process's Python logging starts as a new interpreter's, as a Ray worker's does.

Thespian replaces the root logger of every actor process with its own (``ThespianLogForwarder``), which
sends each record to its logging actor, to be written to the admin's stderr, and refuses
``addHandler``/``removeHandler``. So in a trial a ``logging.getLogger(__name__).warning(...)`` reached the
driver's console without the trial's prefix and never reached the trial's ``stderr.txt``, and a trainable
that called ``logging.basicConfig(force=True)`` or ``logging.getLogger().addHandler(...)`` failed with
``NotImplementedError``. A Ray 2.60 worker's root logger is a plain one at WARNING with no handler (seen in
a trial: ``handlers: []``): a warning falls to ``logging.lastResort``, is written to the trial's stderr and
shows with the trial's prefix, ``info`` is dropped, and a trainable may configure logging as it likes
(seen: both calls work there). The trial process gets that plain root logger back.
"""

from __future__ import annotations

import logging

# Thespian's root logger in an actor process (thespian.system.logdirector), matched by name: no import of it
FORWARDER = "ThespianLogForwarder"


def plain_root_logging() -> bool:
    """Replace Thespian's root logger with a new interpreter's (level WARNING, no handler) and a new
    manager, as Thespian installed its own; False if the root logger was not Thespian's (nothing done).
    Loggers made afterwards (``getLogger``, an unpickled trainable's) descend from the new root."""
    if type(logging.root).__name__ != FORWARDER:
        return False
    root = logging.RootLogger(logging.WARNING)
    logging.root = root
    logging.Logger.root = root
    logging.Logger.manager = logging.Manager(root)
    return True


__all__ = ["FORWARDER", "plain_root_logging"]
