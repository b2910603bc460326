"""``dalenius ldp``: simulate local protocols, pick one, and read a gateway collection's estimates.

* ``simulate`` — true vs estimated frequencies for simulated clients, the error against the
  closed-form variance, optionally a PNG plot (the ``plot`` extra installs matplotlib); a
  progress bar over the clients on standard error when it is a terminal. Simulated reports use
  a seeded generator and never leave the process; real clients always use the OS generator.
* ``pick`` — which frequency oracle has the smallest variance for a domain size and ε.
* ``estimates`` — a gateway collection's estimates with error bars (HTTP, with an API token).
* ``series`` — its estimates per day, week or month of arrival and running totals (HTTP).
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.parse
import urllib.request
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from dalenius.cli.common import EXIT_OK, add_json_option, emit_json
from dalenius.cli.render import Update, progress
from dalenius.core.errors import ConfigurationError, MissingExtraError, UserError
from dalenius.ldp.choose import FACTORIES, make_oracle
from dalenius.ldp.simulate import DISTRIBUTIONS, SimulationResult, simulate, simulate_discovery


def _count(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return int(value)


def register(sub: Any) -> None:
    """Add ``dalenius ldp simulate|pick|estimates|series``."""
    parser = sub.add_parser(
        "ldp",
        help="local differential privacy: simulate protocols, read collections",
        description="Local differential privacy: simulate a protocol, pick one, read estimates.",
    )
    actions = parser.add_subparsers(dest="ldp_command", metavar="ACTION", required=True)

    sim = actions.add_parser(
        "simulate",
        help="true vs estimated frequencies for simulated clients",
        description="Simulate clients of a frequency oracle: true vs estimated counts, error vs theory.",
    )
    sim.add_argument(
        "--protocol",
        default="olh",
        choices=[*FACTORIES, "best", "sfp"],
        help="the frequency oracle (sfp: discover words with sequence-fragment puzzles)",
    )
    sim.add_argument("--epsilon", required=True, help="ε of one report (> 0)")
    sim.add_argument("--users", type=_count, default=100_000, help="clients (1e6 accepted)")
    sim.add_argument(
        "--domain", type=_count, default=1000, help="number of values d (sfp: words, >= 2)"
    )
    sim.add_argument(
        "--alphabet",
        default="abcdefghijklmnopqrstuvwxyz",
        help="sfp: the characters of the simulated words",
    )
    sim.add_argument("--length", type=int, default=8, help="sfp: the longest word")
    sim.add_argument("--dist", default="zipf", choices=DISTRIBUTIONS, help="the true distribution")
    sim.add_argument("--seed", type=int, default=None, help="seed of the data and the simulation")
    sim.add_argument("--top", type=int, default=10, help="rows of the table (most frequent values)")
    sim.add_argument("--confidence", type=float, default=0.95, help="confidence of the error bars")
    sim.add_argument("--plot", default=None, metavar="PNG", help="write a plot to this PNG file")
    sim.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_json_option(sim)
    sim.set_defaults(func=run_simulate)

    pick = actions.add_parser(
        "pick",
        help="the frequency oracle with the smallest variance for (d, ε)",
        description="Compare every frequency oracle's variance per report for a domain and ε.",
    )
    pick.add_argument("--domain", type=_count, required=True, help="number of values d (>= 2)")
    pick.add_argument("--epsilon", required=True, help="ε of one report (> 0)")
    add_json_option(pick)
    pick.set_defaults(func=run_pick)

    _register_reading(actions)


def _register_reading(actions: Any) -> None:
    """Add ``dalenius ldp estimates`` and ``series``: a gateway collection's estimates, over all
    its reports or per period of arrival.
    """
    est = actions.add_parser(
        "estimates",
        help="a gateway collection's estimates with error bars",
        description="Read a local-DP collection's estimates from a running gateway.",
    )
    est.add_argument("name", help="the collection")
    est.add_argument("--url", required=True, help="the gateway's base URL (http://host:port)")
    est.add_argument("--token", required=True, help="an analyst's or curator's API token")
    est.add_argument("--confidence", type=float, default=0.95, help="confidence of the error bars")
    add_json_option(est)
    est.set_defaults(func=run_estimates)

    ser = actions.add_parser(
        "series",
        help="a gateway collection's estimates per day, week or month, and running totals",
        description="Read a local-DP collection's estimates per period of arrival (day, week or "
        "month) and its running totals, each with its error bar, from a running gateway. Free: "
        "post-processing of the reports, each device's loss within the collection's lifetime cap.",
        epilog="example:\n  dalenius ldp series colours --url http://127.0.0.1:8000 --token $TOKEN "
        "--period day --start 2024-03-01 --horizon 31",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ser.add_argument("name", help="the collection")
    ser.add_argument("--url", required=True, help="the gateway's base URL (http://host:port)")
    ser.add_argument("--token", required=True, help="an analyst's or curator's API token")
    ser.add_argument("--period", required=True, choices=["day", "week", "month"])
    ser.add_argument("--start", required=True, help="the first day, YYYY-MM-DD (months: the 1st)")
    ser.add_argument("--horizon", type=_count, required=True, help="periods in the series")
    ser.add_argument("--as-of", default=None, help="periods closed by this day (default today)")
    ser.add_argument("--confidence", type=float, default=0.95, help="confidence of the error bars")
    add_json_option(ser)
    ser.set_defaults(func=run_series)


def run_simulate(args: argparse.Namespace) -> int:
    """``dalenius ldp simulate``."""
    if not 0 < args.confidence < 1:
        raise ConfigurationError(f"--confidence must be in (0, 1), got {args.confidence}.")
    if args.plot:
        _matplotlib()  # refuse before the run, not after
    if args.protocol == "sfp":
        return _simulate_sfp(args)
    with _progress(args) as update:
        result = simulate(
            args.protocol,
            args.epsilon,
            users=args.users,
            domain=args.domain,
            dist=args.dist,
            seed=args.seed,
            confidence=args.confidence,
            progress=update,
        )
    if args.plot:
        _plot(result, Path(args.plot), args.top)
    if args.json:
        out = result.summary()
        out["top"] = _top_rows(result, args.top)
        emit_json(out)
        return EXIT_OK
    s = result.summary()
    print(
        f"{result.protocol}: ε = {result.epsilon:.6g}, {result.users:,} simulated clients, "
        f"d = {result.domain}, {args.dist}"
    )
    print(f"{'value':>8} {'true':>12} {'estimate':>12} {'± error bar':>12}")
    for row in _top_rows(result, args.top):
        print(
            f"{row['value']:>8} {row['true']:>12,} {row['estimate']:>12,.1f} {row['half_width']:>12,.1f}"
        )
    print(
        f"MSE {s['mse']:.6g} (theory {s['theory_mse']:.6g}, ratio {s['mse_ratio']:.4f}); "
        f"max |error| {s['max_abs_error']:.6g}; {100 * float(s['coverage']):.1f}% of the "  # type: ignore[arg-type]
        f"values inside their {100 * result.confidence:g}% error bars; {result.seconds:.2f} s"
    )
    if args.plot:
        print(f"plot written to {args.plot}")
    return EXIT_OK


def _progress(args: argparse.Namespace) -> AbstractContextManager[Update]:
    """A bar over the simulated clients, advanced after each batch of them."""
    return progress(
        "simulating", args.users, "clients", enabled=not (args.no_progress or args.json)
    )


def _simulate_sfp(args: argparse.Namespace) -> int:
    """``dalenius ldp simulate --protocol sfp``: discovery of a random vocabulary's words."""
    if args.plot:
        raise ConfigurationError(
            "--plot draws true vs estimated frequencies of a frequency oracle; sfp has none.",
            fix="drop --plot; the table lists the words found with their true counts.",
        )
    with _progress(args) as update:
        result = simulate_discovery(
            args.epsilon,
            users=args.users,
            vocabulary=args.domain,
            dist=args.dist,
            alphabet=args.alphabet,
            length=args.length,
            seed=args.seed,
            confidence=args.confidence,
            progress=update,
        )
    summary = result.summary(args.top)
    if args.json:
        emit_json(summary)
        return EXIT_OK
    found = result.discovery
    print(
        f"sfp: ε = {result.epsilon:.6g} per report, {result.users:,} simulated clients, "
        f"{len(result.vocabulary):,} words ({args.dist}) of at most {args.length} characters"
    )
    kept = ", ".join(str(k) for k in found.fragments_kept)
    print(
        f"fragments kept per position: {kept} (thresholds about "
        f"{min(found.fragment_threshold):,.0f} clients per position); "
        f"{found.candidates:,} candidate words passed the puzzle check"
    )
    print(f"{'word':<12} {'true':>10} {'estimate':>12} {'± error bar':>12}")
    for row in summary["found"]:  # type: ignore[attr-defined]
        print(
            f"{row['word']:<12} {row['true']:>10,} {row['estimate']:>12,.1f} "
            f"{row['half_width']:>12,.1f}"
        )
    if not found.words:
        print("no word was frequent enough to discover (try more --users or a larger --epsilon)")
    false = result.false_discoveries()
    print(
        f"found {result.found_of_top(args.top)} of the {args.top} most frequent words; "
        f"{len(false)} false discoveries; {result.seconds:.2f} s"
    )
    return EXIT_OK


def _top_rows(result: SimulationResult, top: int) -> list[dict[str, Any]]:
    order = np.argsort(-result.true_counts, kind="stable")[: max(top, 0)]
    return [
        {
            "value": int(v),
            "true": int(result.true_counts[v]),
            "estimate": float(result.estimates[v]),
            "half_width": float(result.half_width[v]),
        }
        for v in order
    ]


def _matplotlib() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError("matplotlib", "plot", "Plotting a simulation") from None
    return plt


def _plot(result: SimulationResult, path: Path, top: int) -> None:
    plt = _matplotlib()
    shown = max(top, 30)
    order = np.argsort(-result.true_counts, kind="stable")[:shown]
    x = np.arange(order.size)
    n = result.users
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.bar(x, result.true_counts[order] / n, color="#c8d6e5", label="true frequency")
    ax.errorbar(
        x,
        result.estimates[order] / n,
        yerr=result.half_width[order] / n,
        fmt="o",
        color="#222f3e",
        markersize=3,
        label=f"estimate ± {100 * result.confidence:g}% error bar",
    )
    ax.set_xlabel("values, most frequent first")
    ax.set_ylabel("frequency")
    ax.set_title(f"{result.protocol}, ε = {result.epsilon:.3g}, {n:,} clients, d = {result.domain}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_pick(args: argparse.Namespace) -> int:
    """``dalenius ldp pick``."""
    rows = []
    for name in FACTORIES:
        try:
            oracle = make_oracle(name, args.domain, args.epsilon)
        except ConfigurationError as error:
            if "at least 2" in error.what or "epsilon" in error.what:
                raise
            continue
        rows.append((oracle.variance_per_report(), name))
    rows.sort()
    from dalenius.ldp.choose import best_oracle

    best = best_oracle(args.domain, args.epsilon).name
    if args.json:
        emit_json({"best": best, "variance_per_report": {n: v for v, n in rows}})
        return EXIT_OK
    print(f"d = {args.domain}, ε = {args.epsilon}: use {best}")
    for variance, name in rows:
        print(f"  {name:>4}  variance per report {variance:.6g}")
    return EXIT_OK


def _read(args: argparse.Namespace, what: str, query: dict[str, Any]) -> Any:
    """GET a collection's ``what`` from the gateway (its refusals as the CLI's errors)."""
    name = urllib.parse.quote(args.name, safe="")
    encoded = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
    url = f"{args.url.rstrip('/')}/v1/ldp/collections/{name}/{what}?{encoded}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {args.token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            body = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        detail = json.loads(error.read() or b"{}").get("error", {})
        raise UserError(
            f"the gateway refused: {detail.get('message', error.reason)}", fix=detail.get("fix")
        ) from None
    except urllib.error.URLError as error:
        raise ConfigurationError(
            f"cannot reach the gateway at {args.url}: {error.reason}.",
            fix="check --url and that `dalenius serve` is running.",
        ) from None
    return body


def run_estimates(args: argparse.Namespace) -> int:
    """``dalenius ldp estimates``."""
    body = _read(args, "estimates", {"confidence": args.confidence})
    if args.json:
        emit_json(body)
        return EXIT_OK
    print(f"{body['collection']} ({body['protocol']}): {body['reports']:,} reports")
    if body["kind"] == "mean":
        if body["mean"] is None:
            print("no reports yet")
        else:
            print(f"mean {body['mean']:.6g}  [{body['lower']:.6g}, {body['upper']:.6g}]")
        return EXIT_OK
    if body["rows"] is None:  # no reports: no estimate, not a confident zero
        print("no reports yet")
        return EXIT_OK
    print(f"{'value':<24} {'estimate':>12} {'lower':>12} {'upper':>12}")
    for row in body["rows"]:
        print(
            f"{row['value']:<24} {row['estimate']:>12,.1f} {row['lower']:>12,.1f} {row['upper']:>12,.1f}"
        )
    return EXIT_OK


def run_series(args: argparse.Namespace) -> int:
    """``dalenius ldp series``: one line per period (frequencies: per period and value)."""
    query = {
        "period": args.period,
        "start": args.start,
        "horizon": args.horizon,
        "as_of": args.as_of,
        "confidence": args.confidence,
    }
    body = _read(args, "series", query)
    if args.json:
        emit_json(body)
        return EXIT_OK
    cap = body["lifetime_epsilon"]
    lifetime = (
        f"each device's lifetime ε at most {cap:g} (the collection's cap)"
        if cap is not None
        else "no lifetime cap: a device's ε grows with its reports"
    )
    print(
        f"{body['collection']} ({body['protocol']}): {body['closed']} of {body['horizon']} "
        f"{body['period']}s closed; ε {body['epsilon_per_report']:.4g} per report, {lifetime}"
    )
    print(f"{'period':<12}{'value':<16}{'estimate':>12}  {'interval':<24}{'running':>12}  interval")
    for point in body["periods"]:
        for label, now, total in _series_lines(point["estimate"], point["running"]):
            print(
                f"{point['period']:<12}{label:<16}{now[0]:>12}  {now[1]:<24}{total[0]:>12}  {total[1]}"
            )
    return EXIT_OK


def _series_lines(
    now: dict[str, Any], total: dict[str, Any]
) -> list[tuple[str, tuple[str, str], tuple[str, str]]]:
    """A period's lines: the value (or "mean"), its estimate and the running total, as text."""

    def cell(value: Any, low: Any, high: Any) -> tuple[str, str]:
        if value is None:
            return "—", "(no reports)"
        return f"{value:,.1f}", f"[{low:,.1f}, {high:,.1f}]"

    if now["kind"] == "mean":
        return [
            (
                "mean",
                cell(now["mean"], now["lower"], now["upper"]),
                cell(total["mean"], total["lower"], total["upper"]),
            )
        ]
    rows = total["rows"] or []
    mine = {r["value"]: r for r in now["rows"] or []}
    out = []
    for r in rows:
        m = mine.get(r["value"])
        here = cell(m["estimate"], m["lower"], m["upper"]) if m else cell(None, None, None)
        out.append((str(r["value"]), here, cell(r["estimate"], r["lower"], r["upper"])))
    return out or [("—", cell(None, None, None), cell(None, None, None))]
