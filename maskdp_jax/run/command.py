"""The front every command shares: its flags, its config file and keys, one error convention.

Every command is built here: ``python -m maskdp_jax.train`` (``train.py``), ``sweep``,
``prepare``, ``audit``, ``release`` and ``anonymize`` on absl flags (:func:`run`), and
``accounting``, ``convert``, ``export`` and ``paper_tables`` on argparse (:func:`run_parser`).
The convention:

* bad input (:data:`USER_ERRORS`: every ``ValueError`` the project raises for user input, a
  missing file, a busy workdir, a bad flag, an unknown config key) prints one line
  ``error: <reason>`` on stderr and the command exits with status 2, before it has written or
  compiled anything;
* an unexpected exception keeps its traceback (exit status 1): it is a bug, not bad input;
* ``-h`` / ``--help`` prints the command's usage, one line per flag and where its config keys are
  documented, and exits 0 (a fresh :class:`absl.flags.FlagValues` has no help flags of its own,
  and a required ``--config`` must not stand in the way of asking what it is).

The commands that take sub-commands or positional arguments use :class:`ArgumentParser`, argparse
with the same convention.

An unknown ``--config.<key>`` is refused here, before ml_collections sees it, naming the key, the
config file and the closest keys the config has. Each command is a function ``cli(argv) -> int``
over fresh :class:`absl.flags.FlagValues`, so the tests run its bad-input table in-process.

>>> import io, contextlib
>>> err = io.StringIO()
>>> def define(fv, argv):
...     config_flag(fv, argv, help="Training config.", sections=("privacy",))
>>> about = About(usage="prog", summary="Train.", keys="configs/default.py")
>>> with contextlib.redirect_stderr(err):
...     run(["prog", "--config=configs/default.py", "--config.epsilon=1"], define=define,
...         work=lambda fv: 0, about=about)
2
>>> print(err.getvalue().strip())
error: --config.epsilon: configs/default.py has no key 'epsilon' (closest: privacy.target_epsilon)
>>> run(["prog", "--help"], define=define, work=lambda fv: 0, about=about)
usage: prog [flags]
<BLANKLINE>
Train.
<BLANKLINE>
flags:
  --config=<string>       Training config.
  --config.<key>=<value>  override one key of the config; the keys: configs/default.py
  -h, --help              print this help and exit
0
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import importlib.util
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence

import ml_collections
from absl import flags
from ml_collections import config_flags

from maskdp_jax.run.workdir_lock import WorkdirBusyError

#: Bad input: the project raises ValueError (and its subclasses: layouts, videos, conversions)
#: for every input it refuses, FileNotFoundError for a missing input and FileExistsError for an
#: output that would overwrite one; these exit with status 2 and one line on stderr.
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, WorkdirBusyError, flags.Error)
EXIT_BAD_INPUT = 2
HELP_FLAGS = ("-h", "--help", "-help", "--helpshort", "--helpfull")


@dataclasses.dataclass(frozen=True)
class About:
    """What ``--help`` says of a command besides its flags.

    Attributes:
      usage: how the command is started, e.g. ``"python -m maskdp_jax.sweep"``.
      summary: what it does, one or two sentences.
      keys: where its config keys are documented ("" for a command without a config).
    """

    usage: str
    summary: str
    keys: str = ""


def wants_help(argv: Sequence[str]) -> bool:
    """Whether the command line asks for help (before anything else is checked)."""
    return any(arg in HELP_FLAGS for arg in argv[1:])


def run(argv: Sequence[str], *, define: Callable[[flags.FlagValues, Sequence[str]], None],
        work: Callable[[flags.FlagValues], int | None], about: About) -> int:
    """Parse ``argv`` with the flags ``define`` declares and call ``work``; its exit status.

    Args:
      argv: the command line, program name first (``sys.argv``).
      define: ``define(fv, argv)`` declares the command's flags on ``fv`` (a fresh
        :class:`absl.flags.FlagValues`); ``argv`` is there for :func:`config_flag`.
      work: the command; returns its exit status (None: 0). It may raise :class:`SystemExit`.
      about: what ``--help`` prints above the flags.

    Returns:
      0 (also after ``--help``), ``work``'s status, or 2 after printing ``error: <reason>`` for
      bad input.
    """
    fv = flags.FlagValues()
    try:
        define(fv, argv)
        if wants_help(argv):
            print(help_text(fv, about))
            return 0
        fv(list(argv))
        check_workdir(fv)
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            return work(fv) or 0
    except USER_ERRORS as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A command's warnings as a user reads them: ``warning: <message>`` on one line, without
    the installed file's path, line number and source line that Python prints by default."""
    print(f"warning: {' '.join(str(message).split())}", file=file or sys.stderr)


def check_workdir(fv: flags.FlagValues) -> None:
    """Refuse a ``--workdir`` that names a file, before the command writes anything (the OS's
    own ``[Errno 17] File exists`` would come from deep inside a run).

    Raises:
      ValueError: the command has a ``--workdir`` flag and it names an existing non-directory.
    """
    workdir = fv["workdir"].value if "workdir" in fv else None
    if workdir and os.path.exists(workdir) and not os.path.isdir(workdir):
        raise ValueError(f"--workdir={workdir} is a file: the workdir must be a directory (a "
                         "new one, or the directory of a run to resume or report on).")


def help_text(fv: flags.FlagValues, about: About) -> str:
    """``--help``: usage, summary, then every flag of ``fv`` on one line with its default."""
    rows = []
    for flag in {id(fv[name]): fv[name] for name in fv}.values():
        if flag.boolean:
            name = f"--[no]{flag.name}"
        else:
            name = f"--{flag.name}=<{flag.flag_type()}>"
        default = "" if flag.default in (None, "") else f" (default: {flag.default_as_str})"
        rows.append((name, " ".join(flag.help.split()) + default))
        if flag.name == "config" and about.keys:
            rows.append(("--config.<key>=<value>",
                         f"override one key of the config; the keys: {about.keys}"))
    rows.append(("-h, --help", "print this help and exit"))
    width = max(len(name) for name, _ in rows) + 2
    lines = [f"usage: {about.usage} [flags]", "", about.summary, "", "flags:"]
    lines += [f"  {name.ljust(width)}{text}" for name, text in rows]
    return "\n".join(lines)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the project's convention: bad input prints one ``error: <reason>`` line and
    exits 2 (argparse prints the usage too), and ``-h`` lists each flag on one line.

    ``prog`` is the command as a user types it (``python -m maskdp_jax.accounting``);
    sub-commands made by ``add_subparsers`` are of this class too.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", functools.partial(
            argparse.RawDescriptionHelpFormatter, max_help_position=40, width=10_000))
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D102 (argparse's hook)
        print(f"error: {self.prog}: {one_line(ValueError(message))}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def run_parser(parser: argparse.ArgumentParser, argv: Sequence[str],
               work: Callable[[argparse.Namespace], int | None]) -> int:
    """Parse ``argv`` (program name first) with ``parser`` and call ``work``; its exit status:
    0 after ``--help``, 2 with ``error: <reason>`` for bad input (:data:`USER_ERRORS`)."""
    try:
        args = parser.parse_args(list(argv[1:]))
    except SystemExit as exit_:  # --help (0) or a bad flag (2, printed by ArgumentParser.error)
        return exit_.code or 0
    try:
        return work(args) or 0
    except USER_ERRORS as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT


def one_line(err: BaseException) -> str:
    """The reason of ``err`` on one line (absl and ml_collections messages span several)."""
    text = str(err)
    if isinstance(err, KeyError) and len(err.args) == 1:
        text = str(err.args[0])
    return " ".join(text.split()) or type(err).__name__


def config_flag(fv: flags.FlagValues, argv: Sequence[str], *, help: str,
                default: str | None = None, sections: Sequence[str] = (),
                kind: str = "") -> None:
    """Declare ``--config`` (a ``configs/*.py`` file, overridable with ``--config.<key>=...``)
    after checking the config file and every overridden key.

    Args:
      fv: the command's flags.
      argv: the command line (the overrides are read from it, as ml_collections does).
      help: the flag's help text.
      default: the config file when ``--config`` is not given (None: required).
      sections: top-level keys the command needs (a sweep config has ``sweep`` and ``base``).
      kind: what the config must be, for the error (e.g. ``"a sweep config
        (configs/sweep_*.py)"``).

    Raises:
      ValueError: no config given, a file that cannot be loaded, missing sections, or an unknown
        key; each names the file and what to change.
    """
    if wants_help(argv):  # --help lists the flag; nothing is loaded or checked
        flags.DEFINE_string("config", default, help, flag_values=fv)
        return
    path = _config_path(argv) or default
    if not path:
        raise ValueError(f"--config is required: {kind or 'a configs/*.py file'}.")
    config = load_config(path)
    missing = [s for s in sections if s not in config]
    if missing:
        hint = ""
        if "sweep" in config and "base" in config and "sweep" not in sections:
            hint = (f" It is a sweep config: run it with python -m maskdp_jax.sweep "
                    f"--config={path} --workdir=DIR.")
        raise ValueError(f"{_file(path)} is not {kind or 'a config for this command'}: it has no "
                         f"{' or '.join(repr(s) for s in missing)} section.{hint}")
    for key in _overridden_keys(argv):
        check_key(config, key, source=_file(path))
    config_flags.DEFINE_config_file("config", default, help, flag_values=fv, lock_config=True,
                                    sys_argv=list(argv))


def load_config(path: str) -> ml_collections.ConfigDict:
    """``get_config()`` of a config file; ``path[:arg]`` passes ``arg`` as ml_collections does.

    Raises:
      FileNotFoundError: no such file.
      ValueError: the file has no ``get_config``.
    """
    file = _file(path)
    arg = path[len(file) + 1:]
    if not os.path.isfile(file):
        raise FileNotFoundError(f"--config={path}: no such config file.")
    spec = importlib.util.spec_from_file_location(f"_config_{time.monotonic_ns()}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ValueError(f"--config={path}: {file} defines no get_config().")
    return module.get_config(arg) if arg else module.get_config()


#: Training-config keys that moved, and where to: the settings that cannot change ε live in
#: ``config.compute``.
MOVED_KEYS = {
    "privacy.microbatch_size": "compute.microbatch_size",
    "privacy.per_example": "compute.per_example",
    "model.compute_dtype": "compute.dtype",
}


def moved_key_message(key: str) -> str | None:
    """Why ``key`` (a training key, or a sweep's ``base.<key>``) is refused when it moved."""
    base, _, rest = key.partition(".")
    old = rest if base == "base" else key
    if old not in MOVED_KEYS:
        return None
    new = MOVED_KEYS[old] if old == key else f"base.{MOVED_KEYS[old]}"
    return (f"{key} is now {new} (settings that cannot change ε live in the `compute` "
            "section).")


def check_key(config: ml_collections.ConfigDict, key: str, *, source: str) -> None:
    """Refuse ``--config.<key>`` when ``config`` has no such (dotted) key.

    Raises:
      ValueError: naming the key, ``source`` and the closest keys the config has (or, for a key
        that moved, its new name).
    """
    moved = moved_key_message(key)
    if moved:
        raise ValueError(f"--config.{moved}")
    node = config
    for part in key.split("."):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            close = difflib.get_close_matches(key, _keys(config), n=3, cutoff=0.5) or [
                k for k in _keys(config) if k.split(".")[-1] == key.split(".")[-1]][:3]
            if not close:  # the leaf name alone, anywhere in the config
                leaf = key.split(".")[-1]
                close = [k for k in _keys(config) if leaf in k.split(".")[-1]][:3]
            hint = f" (closest: {', '.join(close)})" if close else ""
            raise ValueError(f"--config.{key}: {source} has no key {part!r}{hint}")
        node = node[part]


def _keys(config: ml_collections.ConfigDict, prefix: str = "") -> list[str]:
    out = []
    for k, v in config.items():
        out.append(prefix + k)
        if isinstance(v, ml_collections.ConfigDict):
            out += _keys(v, prefix + k + ".")
    return out


def _file(path: str) -> str:
    """The file part of ``path[:arg]``."""
    head, sep, _ = path.partition(".py:")
    return head + ".py" if sep else path


def _config_path(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv[1:], start=1):
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _overridden_keys(argv: Sequence[str]) -> list[str]:
    return [arg[len("--config."):].split("=", 1)[0] for arg in argv[1:]
            if arg.startswith("--config.")]


def cli(argv: Sequence[str], work: Callable[[object, str], str], *, config_help: str,
        default_workdir: str, about: About, sections: Sequence[str] = (),
        kind: str = "") -> int:
    """A ``python -m <part> --config=... --workdir=...`` command as a function of the command
    line (its ``__main__`` calls ``sys.exit(cli(sys.argv))``): ``work(config, workdir)`` returns
    the line to print; the exit status."""

    def define(fv, argv):
        config_flag(fv, argv, help=config_help, sections=sections, kind=kind)
        flags.DEFINE_string("workdir", default_workdir, "Output directory.", flag_values=fv)

    def go(fv):
        start = time.time()
        summary = work(fv.config, fv.workdir)
        print(f"{summary} ({time.time() - start:.0f} s)")

    return run(argv, define=define, work=go, about=about)
