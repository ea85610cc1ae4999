"""The dashboard's web app (Starlette): one HTML page, its script and style, Plotly's bundle, and a JSON API.

The page polls the API every ``poll_ms`` and redraws in place, so a running experiment is followed
without reloading. Each endpoint reads through the ``Catalog`` (cached reads of storage) and shapes
the answer with ``view`` (pure); large experiments stay fast because the table is paged and the
curves are picked and downsampled here, not in the browser.
"""

from __future__ import annotations

import importlib.util
import os
import time
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from actors._dashboard import view
from actors._dashboard.access import RequireToken
from actors._dashboard.source import Catalog, ExperimentSource
from actors._driver.errors import ConfigError

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_PAGE = 500
DEFAULT_TOP = 50
MAX_TRIALS_PER_CURVE_CALL = 500


def plotly_bundle() -> str:
    """Path of ``plotly.min.js`` inside the installed ``plotly`` package (found without importing it)."""
    spec = importlib.util.find_spec("plotly")
    for base in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(base, "package_data", "plotly.min.js")
        if os.path.isfile(path):
            return path
    raise ConfigError("the dashboard needs the plotly package (its bundled plotly.min.js): "
                      "pip install 'audition[dashboard]'")


class _Api:
    def __init__(self, catalog: Catalog, clock: Any = time.time) -> None:
        self.catalog, self.clock = catalog, clock
        # (trial, metric, mode) -> (the history it was computed from, that trial's part of "best so far")
        self._best: dict[tuple[str, str, str], tuple[list[dict[str, Any]], view.TrialBest]] = {}
        self._best_result: tuple[Any, dict[str, Any]] | None = None  # unchanged parts: the same answer

    def _source(self, request: Request) -> ExperimentSource:
        name = request.path_params["name"]
        source = self.catalog.source(name)
        if source is None:
            raise _NotFound(f"no experiment named {name!r} at {self.catalog.where}")
        return source

    # ------------------------------------------------------------------ endpoints
    def experiments(self, request: Request) -> dict[str, Any]:
        out = []
        for name in self.catalog.names():
            source = self.catalog.source(name)
            if source is None:
                continue
            try:
                trials = source.trials()
                metric, mode = source.metric_mode()
                out.append({"name": name, "num_trials": len(trials), "metric": metric, "mode": mode,
                            "counts": view.overview(name, source.where, trials, metric, mode, None, 0)["counts"],
                            "best": view.best(trials, metric, mode), "written_at": source.written_at()})
            except ConfigError as exc:
                out.append({"name": name, "error": str(exc)})
        return {"where": self.catalog.where, "single": self.catalog.single, "experiments": view.clean(out)}

    def overview(self, request: Request) -> dict[str, Any]:
        source = self._source(request)
        state = source.state()
        metric, mode = source.metric_mode()
        return view.overview(source.name, source.where, source.trials(), metric, mode, source.written_at(),
                             self.clock(), started=state is not None)

    def trials(self, request: Request) -> dict[str, Any]:
        source = self._source(request)
        q = request.query_params
        metric = q.get("metric") or source.metric_mode()[0]
        statuses = {s for s in q.get("status", "").split(",") if s}
        return view.table(source.trials(), metric, sort=q.get("sort", "trial_id"), desc=q.get("desc") == "1",
                          statuses=statuses or None, query=q.get("q", ""), offset=_int(q, "offset", 0, 0, 10**9),
                          limit=_int(q, "limit", 50, 1, MAX_PAGE))

    def curves(self, request: Request) -> dict[str, Any]:
        source = self._source(request)
        q = request.query_params
        trials = source.trials()
        metric, mode = source.metric_mode()
        metric = q.get("metric") or metric or (view.metric_keys(trials) or ["training_iteration"])[0]
        wanted = [t for t in q.get("trials", "").split(",") if t][:MAX_TRIALS_PER_CURVE_CALL]
        known = {t["trial_id"]: t for t in trials}
        ids = [t for t in wanted if t in known] if wanted else view.pick_trials(
            trials, metric, mode, _int(q, "top", DEFAULT_TOP, 1, MAX_TRIALS_PER_CURVE_CALL))
        out = view.curves(source.histories(ids), known, metric, q.get("x", "training_iteration"),
                          _int(q, "max_points", 400, 10, 20000))
        out["shown"], out["total"] = len(ids), len(trials)
        return out

    def best(self, request: Request) -> dict[str, Any]:
        source = self._source(request)
        trials = source.trials()
        metric, mode = source.metric_mode()
        metric = request.query_params.get("metric") or metric
        mode = request.query_params.get("mode") or mode or "min"
        if not metric or mode not in ("min", "max"):
            return {"metric": metric, "mode": mode, "x": [], "y": [], "trial_id": [], "results": 0,
                    "note": "choose a metric"}
        histories = source.histories([t["trial_id"] for t in trials])
        pieces = {}
        for tid, rows in histories.items():  # a trial's part is computed again only when its history changed
            key = (tid, metric, mode)
            cached = self._best.get(key)
            if cached is None or cached[0] is not rows:
                cached = self._best[key] = (rows, view.improvements(rows, metric, mode))
            pieces[tid] = cached[1]
        version = (metric, mode, tuple(id(p) for p in pieces.values()))  # the parts are kept alive in _best
        if self._best_result is None or self._best_result[0] != version:
            self._best_result = (version, view.best_so_far(pieces, metric, mode))
        return self._best_result[1]

    def parallel(self, request: Request) -> dict[str, Any]:
        source = self._source(request)
        metric = request.query_params.get("metric") or source.metric_mode()[0]
        return view.parallel(source.trials(), metric)

    def trial(self, request: Request) -> dict[str, Any]:
        source = self._source(request)
        tid = request.path_params["trial_id"]
        row = next((t for t in source.trials() if t["trial_id"] == tid), None)
        if row is None:
            raise _NotFound(f"experiment {source.name} has no trial {tid!r}")
        return view.trial_detail(row, source.checkpoints(tid), source.tail(tid, "stdout"),
                                 source.tail(tid, "stderr"), source.tail(tid, "error"))


class _NotFound(Exception):
    pass


def _int(q: Any, name: str, default: int, lo: int, hi: int) -> int:
    try:
        return min(hi, max(lo, int(q.get(name, default))))
    except (TypeError, ValueError):
        return default


def _endpoint(fn: Any) -> Any:
    def run(request: Request) -> Response:
        try:
            return JSONResponse(fn(request), headers={"cache-control": "no-store"})
        except _NotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except ConfigError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
    return run


def create_app(catalog: Catalog, *, token: str | None = None, poll_ms: int = 1500) -> Starlette:
    """The dashboard for ``catalog``; with ``token``, every request must present it (see ``access``)."""
    api = _Api(catalog)
    bundle = plotly_bundle()
    with open(os.path.join(STATIC, "index.html"), encoding="utf-8") as f:
        page = f.read().replace("__POLL_MS__", str(int(poll_ms)))

    def index(request: Request) -> Response:
        return HTMLResponse(page, headers={"cache-control": "no-store"})

    def static(request: Request) -> Response:
        name = request.path_params["file"]
        if name == "plotly.min.js":
            return FileResponse(bundle, media_type="text/javascript")
        if name not in ("app.js", "style.css"):
            return Response("not found", status_code=404)
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        return FileResponse(os.path.join(STATIC, name), media_type=kind, headers={"cache-control": "no-cache"})

    routes = [
        Route("/", index), Route("/static/{file}", static),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/experiments", _endpoint(api.experiments)),
        Route("/api/e/{name}/overview", _endpoint(api.overview)),
        Route("/api/e/{name}/trials", _endpoint(api.trials)),
        Route("/api/e/{name}/curves", _endpoint(api.curves)),
        Route("/api/e/{name}/best", _endpoint(api.best)),
        Route("/api/e/{name}/parallel", _endpoint(api.parallel)),
        Route("/api/e/{name}/trial/{trial_id}", _endpoint(api.trial)),
    ]
    middleware = [Middleware(RequireToken, token=token)] if token else []  # type: ignore[arg-type]
    return Starlette(routes=routes, middleware=middleware)


__all__ = ["create_app", "plotly_bundle"]
