"""``audition dashboard``: a live web view of experiments, read from storage only.

``source`` reads (JSON and text, never a pickle), ``view`` shapes (pure), ``app`` serves (Starlette),
``access`` guards (a token from the cluster key beyond loopback), ``serve`` binds and runs (uvicorn).
Needs the ``dashboard`` extra: ``pip install 'audition[dashboard]'``.
"""
