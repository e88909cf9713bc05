"""Command line: ε for σ, σ for ε, and the papers' settings table.

Examples::

    # ε of the NTU-like run at σ = 1, both accountants, special adjacency
    python -m maskdp_jax.accounting epsilon --sigma 1 --num-examples 40320 --batch-size 128 \\
        --epochs 150 --delta 1e-6
    # same, literal Definition 2 (replace) and the papers' coupled Algorithm 1
    python -m maskdp_jax.accounting epsilon --sigma 3 --q 0.0031746 --steps 47250 --delta 1e-6 \\
        --adjacency replace --sampling coupled
    # smallest σ for ε = 1
    python -m maskdp_jax.accounting sigma --epsilon 1 --num-examples 9537 --batch-size 128 \\
        --epochs 300 --delta 1e-5
    # σ by RDP and PLD for the papers' datasets at ε ∈ {0.1, ..., 10} (Markdown)
    python -m maskdp_jax.accounting table
    # ε under both adjacencies and both sampling schemes on the papers' datasets
    python -m maskdp_jax.accounting compare --sigma 1 3
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from maskdp_jax.accounting import accountant, events, inputs, paper_settings
from maskdp_jax.run import command


def _add_run_args(parser: argparse.ArgumentParser) -> None:
    run = parser.add_argument_group("run (give --q and --steps, or N, B and epochs)")
    run.add_argument("--q", type=float, help="Poisson sampling rate B/N")
    run.add_argument("--steps", type=int, help="number of logical steps")
    run.add_argument("--num-examples", type=int, help="N, training videos")
    run.add_argument("--batch-size", type=int, help="B, expected batch size")
    run.add_argument("--epochs", type=float, help="epochs; steps = ceil(epochs·ceil(N/B))")
    parser.add_argument("--delta", type=float, required=True, help="δ of the guarantee")
    parser.add_argument("--method", choices=("pld", "rdp", "both"), default="both")
    parser.add_argument("--adjacency", choices=inputs.ADJACENCIES, default="special")
    parser.add_argument("--sampling", choices=inputs.SAMPLINGS, default="decoupled")
    parser.add_argument("--bands", type=int, default=1,
                        help="banded correlated noise (privacy.noise=banded, privacy.bands): "
                             "accounted as rate bands·q over ceil(steps/bands) rounds")


def _run(args: argparse.Namespace) -> tuple[float, int]:
    """The accounted (q, steps): from either --q/--steps or --num-examples/--batch-size/
    --epochs, then converted for --bands (amplified BandMF, events.banded_segment)."""
    q, steps = _run_steps(args)
    if args.bands == 1:
        return q, steps
    if args.sampling != "decoupled":
        raise ValueError("--bands needs --sampling decoupled (banded noise samples the private "
                         "batch cyclically, independently of the public one).")
    seg = events.banded_segment(q=q, noise_multiplier=1.0, steps=max(steps, 1),
                                bands=args.bands)
    return inputs.check_q(seg.q), seg.steps if steps else 0


def _run_steps(args: argparse.Namespace) -> tuple[float, int]:
    """(q, steps) from either --q/--steps or --num-examples/--batch-size/--epochs."""
    direct = args.q is not None or args.steps is not None
    derived = any(v is not None for v in (args.num_examples, args.batch_size, args.epochs))
    if direct == derived:
        raise ValueError("give either --q and --steps, or --num-examples, --batch-size, --epochs")
    inputs.check_delta_range(args.delta)
    if direct:
        if args.q is None or args.steps is None:
            raise ValueError("--q and --steps go together")
        return inputs.check_q(args.q), inputs.check_steps(args.steps, minimum=0)
    if None in (args.num_examples, args.batch_size, args.epochs):
        raise ValueError("--num-examples, --batch-size and --epochs go together")
    if args.num_examples < 1 or args.batch_size < 1 or args.epochs <= 0:
        raise ValueError("--num-examples, --batch-size and --epochs must be positive")
    inputs.check_delta(delta=args.delta, num_examples=args.num_examples)
    steps = events.steps_for_epochs(num_examples=args.num_examples,
                                    batch_size=args.batch_size, epochs=args.epochs)
    return args.batch_size / args.num_examples, steps


def _methods(choice: str) -> tuple[str, ...]:
    return ("rdp", "pld") if choice == "both" else (choice,)


def _header(args: argparse.Namespace, q: float, steps: int) -> str:
    banded = (f" (banded, {args.bands} bands: the accounted rate and rounds)"
              if args.bands > 1 else "")
    return (
        f"q={q:.6g} steps={steps}{banded} delta={args.delta:g} adjacency={args.adjacency} "
        f"sampling={args.sampling}"
    )


def _unavailable(method: str, name: str, err: ValueError, args: argparse.Namespace,
                 failed: list[str]) -> None:
    """With ``--method both`` one accountant may not cover a case (RDP with Poisson and replace):
    print why and go on; if no accountant answers, the command fails (exit status 2)."""
    if args.method != "both":
        raise err
    print(f"{name}[{method}] = n/a ({err})")
    failed.append(str(err))
    if len(failed) == len(_methods(args.method)):
        raise ValueError("no accountant could answer: " + "; ".join(failed))


def _cmd_epsilon(args: argparse.Namespace) -> None:
    q, steps = _run(args)
    inputs.check_noise_multiplier(args.sigma, allow_zero=True)
    print(_header(args, q, steps) + f" sigma={args.sigma:g}")
    failed: list[str] = []
    for method in _methods(args.method):
        start = time.perf_counter()
        try:
            eps = accountant.epsilon(
                q=q,
                noise_multiplier=args.sigma,
                steps=steps,
                delta=args.delta,
                method=method,
                adjacency=args.adjacency,
                sampling=args.sampling,
            )
        except ValueError as err:
            _unavailable(method, "epsilon", err, args, failed)
            continue
        print(f"epsilon[{method}] = {eps:.6g}  ({time.perf_counter() - start:.2f} s)")


def _cmd_sigma(args: argparse.Namespace) -> None:
    q, steps = _run(args)
    inputs.check_epsilon_target(args.epsilon)
    print(_header(args, q, steps) + f" target_epsilon={args.epsilon:g}")
    failed: list[str] = []
    for method in _methods(args.method):
        start = time.perf_counter()
        try:
            sigma = accountant.calibrate_noise_multiplier(
                target_epsilon=args.epsilon,
                delta=args.delta,
                q=q,
                steps=steps,
                method=method,
                adjacency=args.adjacency,
                sampling=args.sampling,
            )
        except ValueError as err:
            _unavailable(method, "sigma", err, args, failed)
            continue
        print(f"sigma[{method}] = {sigma:.6g}  ({time.perf_counter() - start:.2f} s)")


def _cmd_table(args: argparse.Namespace) -> None:
    methods = tuple(m for m in ("rdp", "pld")
                    if accountant.supports(m, adjacency=args.adjacency, sampling=args.sampling))
    print(
        f"σ (noise multiplier) reaching ε; adjacency={args.adjacency}, "
        f"sampling={args.sampling}; batch 128, C = 1; steps = epochs·ceil(N/B).\n"
    )
    cols = [f"{s.name} {m.upper()}" for s in paper_settings.PAPER_SETTINGS for m in methods]
    print("| ε | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    start = time.perf_counter()
    for eps in args.epsilons:
        cells = []
        for setting in paper_settings.PAPER_SETTINGS:
            for method in methods:
                sigma = accountant.calibrate_noise_multiplier(
                    target_epsilon=eps,
                    delta=setting.delta,
                    q=setting.q,
                    steps=setting.steps,
                    method=method,
                    adjacency=args.adjacency,
                    sampling=args.sampling,
                    num_examples=setting.num_examples,
                )
                cells.append(f"{sigma:.4f}")
        print(f"| {eps:g} | " + " | ".join(cells) + " |")
    print()
    print("| dataset | N | epochs | δ | q = B/N | steps |")
    print("|---|---|---|---|---|---|")
    for s in paper_settings.PAPER_SETTINGS:
        print(f"| {s.name} | {s.num_examples} | {s.epochs} | {s.delta:g} | {s.q:.6g} | {s.steps} |")
    print(
        f"\n({len(args.epsilons) * len(cols)} calibrations in {time.perf_counter() - start:.1f} s)"
    )


def _cmd_compare(args: argparse.Namespace) -> None:
    cases = [
        ("special", "decoupled"),
        ("replace", "decoupled"),
        ("special", "coupled"),
        ("replace", "coupled"),
    ]
    cols = [f"{adj}/{smp} {m.upper()}" for adj, smp in cases for m in ("rdp", "pld")]
    print("ε by adjacency/sampling and accountant; steps = epochs·ceil(N/B), batch 128.\n")
    print("| dataset | σ | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for setting in paper_settings.PAPER_SETTINGS:
        for sigma in args.sigma:
            cells = []
            for adjacency, sampling in cases:
                for method in ("rdp", "pld"):
                    if not accountant.supports(method, adjacency=adjacency, sampling=sampling):
                        cells.append("n/a")
                        continue
                    eps = accountant.epsilon(
                        q=setting.q,
                        noise_multiplier=sigma,
                        steps=setting.steps,
                        delta=setting.delta,
                        method=method,
                        adjacency=adjacency,
                        sampling=sampling,
                    )
                    cells.append(f"{eps:.4g}")
            print(f"| {setting.name} | {sigma:g} | " + " | ".join(cells) + " |")


def cli(argv: Sequence[str]) -> int:
    """``python -m maskdp_jax.accounting ...`` as a function of the command line (program name
    first); the exit status: 0, or 2 with ``error: <reason>`` on stderr for bad input."""
    parser = command.ArgumentParser(prog="python -m maskdp_jax.accounting", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True,
                                title="commands (each has its own --help)")
    p_eps = sub.add_parser("epsilon", help="ε for a given noise multiplier")
    p_eps.add_argument("--sigma", type=float, required=True, help="noise multiplier σ")
    _add_run_args(p_eps)
    p_eps.set_defaults(func=_cmd_epsilon)
    p_sig = sub.add_parser("sigma", help="smallest noise multiplier for a target ε")
    p_sig.add_argument("--epsilon", type=float, required=True, help="target ε")
    _add_run_args(p_sig)
    p_sig.set_defaults(func=_cmd_sigma)
    p_tab = sub.add_parser("table", help="σ per ε for the papers' datasets (Markdown)")
    p_tab.add_argument("--epsilons", type=float, nargs="+",
                       default=list(paper_settings.PAPER_EPSILONS), help="the table's columns")
    p_tab.add_argument("--adjacency", choices=inputs.ADJACENCIES, default="special")
    p_tab.add_argument("--sampling", choices=inputs.SAMPLINGS, default="decoupled")
    p_tab.set_defaults(func=_cmd_table)
    p_cmp = sub.add_parser("compare", help="ε under both adjacencies and sampling schemes")
    p_cmp.add_argument("--sigma", type=float, nargs="+", required=True,
                       help="noise multipliers σ")
    p_cmp.set_defaults(func=_cmd_compare)
    return command.run_parser(parser, argv, lambda args: args.func(args))


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
