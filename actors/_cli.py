"""The ``audition`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from actors import __version__
    from actors._errors import ConfigError

    parser = argparse.ArgumentParser(prog="audition", description="Hyperparameter tuning on Thespian actors.")
    parser.add_argument("--version", action="version", version=f"audition {__version__}")
    sub = parser.add_subparsers(dest="verb")
    w = sub.add_parser("worker", help="join a leader's convention and run trials placed on this machine")
    w.add_argument("--leader", required=True, help="HOST:PORT of the driver's system (RunConfig(system='tcp://…'))")
    w.add_argument("--bind", help="address to listen on (default: the one on the route to the leader)")
    w.add_argument("--port", type=int, help="admin port of this member (default: a free one)")
    w.add_argument("--cpus", type=float, help="CPUs to offer (default: all)")
    w.add_argument("--resources", help='other resources as JSON, e.g. \'{"gpu": 1}\'')
    w.add_argument("--id", dest="member_id", help="member identity (default: HOSTNAME-PORT)")
    c = sub.add_parser("cluster", help="inspect a running multi-host experiment")
    csub = c.add_subparsers(dest="cluster_verb", required=True)
    st = csub.add_parser("status", help="members, their free resources and the trial counts")
    st.add_argument("--leader", required=True, help="HOST:PORT of the driver's system (run on the leader's machine)")
    st.add_argument("--json", action="store_true", help="print JSON for scripts")
    args = parser.parse_args(argv)
    if args.verb == "cluster":
        import json

        from actors._worker import cluster_status

        try:
            status = cluster_status(args.leader)
        except ConfigError as exc:
            print(f"audition cluster status: {exc}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(status, indent=2, sort_keys=True))
            return 0
        if status["experiment"] is None:
            print("no experiment is running on this leader")
            return 0
        print(f"experiment {status['experiment']}: " +
              ", ".join(f"{n} {s}" for s, n in sorted(status["trials"].items())))
        for m in status["members"]:
            free = ", ".join(f"{k} {v:g}/{m['resources'][k]:g}" for k, v in sorted(m["free"].items()))
            state = "LOST" if m.get("lost") else "ok"
            print(f"  {m['member']:<24} {state:<5} free {free}  trials {len(m['trials'])}")
        return 0
    if args.verb == "worker":
        from actors._worker import run_worker

        try:
            return run_worker(args.leader, args.bind, args.port, args.cpus, args.resources, args.member_id)
        except ConfigError as exc:
            print(f"audition worker: {exc}", file=sys.stderr)
            return 2
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
