"""``audition dashboard URL``: check every input, then serve until Ctrl-C.

Every problem is found before the server starts and is one ``ConfigError`` (the CLI prints it as one
line and exits 2): the extra not installed, no experiment at the URL, a port in use, an address beyond
loopback without a usable cluster key.
"""

from __future__ import annotations

import argparse
import sys

from actors._driver.errors import ConfigError

DEFAULT_PORT = 8270


def add_parser(sub: argparse._SubParsersAction, url_help: str, storage_help: str, key_file_help: str) -> None:
    d = sub.add_parser("dashboard", help="a live web view of an experiment (or a directory of them) in storage",
                       description="Serve a web page that follows an experiment from storage: the trial table, "
                       "learning curves with the scheduler's marks, the best value so far, parallel coordinates "
                       "and each trial's config, checkpoints, output and error. Reads JSON and text only (never "
                       "a pickle); works while the experiment runs, after it finished, or after its driver died. "
                       "Needs pip install 'audition[dashboard]'.",
                       epilog="example: audition dashboard ~/audition_results/my_run, then open "
                       f"http://127.0.0.1:{DEFAULT_PORT}/")
    d.add_argument("url", metavar="URL", help=url_help + ", or the storage path holding several experiments")
    d.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port (default: %(default)s; 0: a free one)")
    d.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: %(default)s, this machine only); any other address "
                   "needs the cluster key, and the page then asks for the token it prints")
    d.add_argument("--key-file", metavar="PATH", help=key_file_help)
    d.add_argument("--metric", help="the metric to rank and colour by (default: the experiment's own)")
    d.add_argument("--mode", choices=("min", "max"), help="with --metric: whether lower or higher is better")
    d.add_argument("--poll", type=float, default=1.5, metavar="SECONDS",
                   help="how often the page reads storage again (default: %(default)s)")
    d.add_argument("--storage-options", metavar="JSON", help=storage_help)


def token_for(host: str, key_file: str | None) -> str | None:
    """None on loopback without a key file; else the token derived from the cluster key (which must exist)."""
    from actors._cluster.auth_keys import ENV_KEY, ENV_KEY_FILE, load_cluster_key, load_key_file
    from actors._dashboard.access import dashboard_token, is_loopback

    if key_file:
        return dashboard_token(load_key_file(key_file))
    key = load_cluster_key()
    if key is not None:
        return dashboard_token(key)
    if is_loopback(host):
        return None
    raise ConfigError(f"serving on {host} lets other machines in, so it needs the cluster key: set ${ENV_KEY} or "
                      f"${ENV_KEY_FILE}, or pass --key-file (docs/security.md); or leave out --host to serve on "
                      "127.0.0.1 only")


def run(args: argparse.Namespace) -> int:
    from actors._cli.inspect import parse_storage_options
    from actors._dashboard.serve import bind, require_extra

    require_extra()
    if args.mode and not args.metric:
        raise ConfigError("--mode needs --metric (the experiment's own metric comes with its own mode)")
    if not 0.2 <= args.poll <= 600:
        raise ConfigError(f"--poll {args.poll}: pass a number of seconds from 0.2 to 600")
    token = token_for(args.host, args.key_file)
    options = parse_storage_options(args.storage_options)

    from actors._dashboard.app import create_app
    from actors._dashboard.serve import server
    from actors._dashboard.source import open_catalog

    catalog = open_catalog(args.url, options, args.metric, args.mode)
    app = create_app(catalog, token=token, poll_ms=int(args.poll * 1000))
    sock = bind(args.host, args.port)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    what = "the experiments in" if not catalog.single else "experiment"
    print(f"audition dashboard: serving {what} {catalog.where} at http://{shown}:{port}/"
          + (f"?token={token}" if token else "") + " (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        server(app).run(sockets=[sock])
    finally:
        sock.close()
    return 0


__all__ = ["DEFAULT_PORT", "add_parser", "run", "token_for"]
