"""The ``neuronviz`` command line. Bad input ends with a one-line error and exit code 2."""

from __future__ import annotations

import argparse
import codecs
import io
import json
import math
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from neuronviz.binding_check import binding_problem
from neuronviz.progress import TerminalBar
from neuronviz.report import file_summary, run_record, runs_table
from sim import options
from sim.errors import SimError
from sim.hardware.chip import all_chips
from sim.hardware.instances import instances_of
from sim.io.inputs import csv_export_of, profile_of
from sim.run import RunConfig, simulate
from sim.trace import Trace
from sim.validated import headline_record
from sim.workloads import get_model, preset_names

EXIT_USAGE = 2
FILES_HELP = "trace files (.nvtrace, Chrome JSON) or Neuron Explorer profile directories"
SIGNAL_EXIT = 128  # a command stopped by signal N exits with 128 + N, as a shell reports it
EXIT_INTERRUPTED = SIGNAL_EXIT + signal.SIGINT  # Ctrl+C: 130
DEFAULT_CHIPS = "inf1,inf2,trn1,trn2"


class UserError(Exception):
    """A problem with the user's input, reported as one line."""


class _Parser(argparse.ArgumentParser):
    """Argument errors in one line, pointing at the help (argparse's own prints the whole usage,
    dozens of lines for ``simulate``, before them)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {value}")
    return value


def cmd_models(args: argparse.Namespace) -> int:
    from sim.workloads import parameters

    width = max(map(len, preset_names()))
    print(f"{'model':{width}s} {'type':12s} {'family':20s} {'params':>10s}  source")
    for name in preset_names():
        spec = get_model(name)
        family = spec.family + (f" MoE top-{spec.experts_per_token}/{spec.experts}" if spec.experts else "")
        params = parameters(spec)
        print(f"{name:{width}s} {spec.model_type:12s} {family:20s} {params / 1e6:9.1f}M  {spec.source}")
    print("\nAny Hugging Face config.json of these model types works too: --model path/to/config.json")
    return 0


def cmd_chips(args: argparse.Namespace) -> int:
    print(f"{'chip':5s} {'name':12s} {'core':14s} {'cores':>5s} {'BF16 TFLOPS':>11s} {'memory':>12s}  instances")
    for chip in all_chips().values():
        mem = f"{chip.memory_bytes / 2**30:.0f} GiB {chip.memory_kind}"
        insts = ", ".join(
            f"{i.name} ({i.chips}x, " + (f"${i.price_usd_per_hour:.2f}/h)" if i.price_usd_per_hour else "no price)")
            for i in instances_of(chip))
        print(f"{chip.key:5s} {chip.name:12s} {chip.core_version:14s} {chip.cores:5d} "
              f"{chip.peak_flops('bf16') / 1e12:11.0f} {mem:>12s}  {insts}")
    return 0


def simulate_runs(args: argparse.Namespace) -> list[Trace]:
    """The traces ``neuronviz simulate`` asks for, one per chip, in the order given. Of the default
    chips, those that cannot run the configuration (too little memory, a format they lack) are
    left out with a note on stderr; chips asked for by name must all run it."""
    if args.instance:
        chips = [None]
        if args.chips:
            chips = [c.strip() for c in args.chips.split(",") if c.strip()]
    else:
        chips = [c.strip() for c in (args.chips or DEFAULT_CHIPS).split(",") if c.strip()]
        if not chips:
            raise UserError("--chips names no chip")
    if args.chips or args.instance:
        return [simulate(_run_config(args, chip)) for chip in chips]
    traces, refused = [], []
    for chip in chips:
        try:
            traces.append(simulate(_run_config(args, chip)))
        except SimError as exc:
            refused.append(exc)
    if not traces:
        raise refused[0]
    for exc in refused:
        print(f"neuronviz: left out: {exc}", file=sys.stderr)
    return traces


def _run_config(args: argparse.Namespace, chip: str | None) -> RunConfig:
    return options.config(option_values(args), chip=chip)


def option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The run options' values (by :data:`sim.options.OPTIONS` name) that ``args`` gives."""
    out: dict[str, Any] = {}
    for option in options.OPTIONS:
        if option.kind == options.SET:
            value = tuple(c for c in option.choices if getattr(args, f"{option.name}.{c}"))
        elif option.kind == options.SWITCH and option.cli_values:
            value = getattr(args, option.name) == option.cli_values[1]
        else:
            value = getattr(args, option.name)
        out[option.name] = value
    return out


def _checked(kind: type, option: options.Option) -> Callable[[str], Any]:
    """An argparse type: ``kind`` read from the text, within ``option``'s bounds."""
    what = "whole number" if kind is int else "number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a {what}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        try:
            option.check((value,) if option.kind == options.LENGTHS else value)  # each of a list
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    return parse


def _rates(option: options.Option) -> Callable[[str], tuple[float, ...]]:
    """An argparse type: one rate or several separated by commas ("0.865,0.725,0.635"), each
    within ``option``'s bounds."""

    def parse(text: str) -> tuple[float, ...]:
        try:
            rates = tuple(float(word) for word in text.replace(",", " ").split())
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a rate, nor rates separated by commas") from None
        try:
            option.check(rates)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return rates

    return parse


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """A flag for every run option, from its declaration (:data:`sim.options.OPTIONS`), in its group."""
    groups: dict[str, Any] = {options.GENERAL: parser}
    for option in options.OPTIONS:
        target = groups.get(option.group) or groups.setdefault(option.group, parser.add_argument_group(
            OPTION_GROUPS[option.group]))
        kw: dict[str, Any] = {"dest": option.name, "help": option.help}
        if option.kind == options.SET:
            for choice, flag, text in zip(option.choices, option.flags, option.flag_help, strict=True):
                target.add_argument(flag, dest=f"{option.name}.{choice}", action="store_true", help=text)
            continue
        if option.kind == options.SWITCH:
            kw.update(dict(type=int, choices=option.cli_values, default=option.cli_values[0]) if option.cli_values
                      else dict(action="store_true"))
        elif option.kind == options.CHOICE:
            kw.update(choices=option.choices, type=type(option.choices[0]), default=option.default)
            if option.const is not None:
                kw.update(nargs="?", const=option.const)
        elif option.kind == options.RATES:
            kw.update(type=_rates(option), default=option.default, metavar="RATE[,RATE...]")
        elif option.kind in (options.INT, options.FLOAT, options.LENGTHS):
            kw.update(type=_checked(float if option.kind == options.FLOAT else int, option), default=option.default,
                      metavar="N")
            if option.kind == options.LENGTHS:
                kw["nargs"] = "+"
        else:
            kw["default"] = option.default
        if option.name == "model":  # the one the CLI cannot guess
            kw.update(required=True, default=None)
        target.add_argument(option.flag, *option.aliases, **kw)


OPTION_GROUPS = {options.TRAINING: "training at scale", options.MOE: "mixtures of experts",
                 options.GENERATION: "decode and serve as a serving stack runs them (--mode serve: a stream of "
                                     "requests on one copy, with TTFT/TPOT/ITL percentiles)"}


def cmd_simulate(args: argparse.Namespace) -> int:
    from sim.io import CHROME_SUFFIXES, NATIVE_SUFFIX, save_file

    if args.output:
        out = Path(args.output)
        named = args.output.lower().endswith((NATIVE_SUFFIX, *CHROME_SUFFIXES))
        if not named and (out.is_file() or not out.exists()):  # a directory or a device: the save refuses it
            raise UserError(f"{args.output}: a trace file is named .nvtrace, or .json or .json.gz for Chrome JSON")
    traces = simulate_runs(args)
    if args.output:
        save_file(args.output, traces)
    if args.json:
        # each run's figures, and how far its headline ones can be trusted (their class's error)
        json.dump({"runs": [{**run_record(t), "validated": headline_record(t)} for t in traces]}, sys.stdout,
                  indent=1)
        print()
    else:
        print(runs_table(traces))
        if args.output:
            print(f"saved {len(traces)} run(s) to {args.output}")
    return 0


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="simulate a model on one or more chips")
    p.add_argument("--chips", help=f"comma-separated chip generations (default {DEFAULT_CHIPS}; trn3 too)")
    add_run_options(p)
    p.add_argument("-o", "--output", help="save the runs to a trace file (.nvtrace, or .json/.json.gz for Chrome JSON)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=cmd_simulate)


@contextmanager
def _headless_window(files: list[str], theme: str = "system") -> Iterator[tuple]:
    """The main window on ``files`` (or the demo), offscreen, with throwaway settings, and a check
    that nothing failed in it so far (an export calls it before its file replaces the old one).

    An exception raised inside Qt while the view is built or painted only prints a traceback
    and lets Qt go on; here it fails the command with a one-line error instead, and nothing is written."""
    problem = binding_problem()
    if problem:
        raise UserError(problem)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings, Qt

    from neuronviz.app import build_window, make_app
    from neuronviz.files import check_comparison, files_label, on_one_clock, open_runs

    runs = on_one_clock([run for path in files for run in open_runs(path)]) if files else None
    if runs is not None:
        check_comparison(len(runs), files_label(files))
    make_app(theme)
    failures: list[BaseException] = []

    def nothing_failed() -> None:
        if failures:
            exc = failures[0]
            raise UserError(f"could not render the view ({type(exc).__name__}: {exc})".replace("\n", " "))

    hook, sys.excepthook = sys.excepthook, lambda kind, exc, tb: failures.append(exc)
    try:
        with tempfile.TemporaryDirectory() as tmp:  # never read or touch the user's window settings
            window = build_window(runs, QSettings(f"{tmp}/settings.ini", QSettings.Format.IniFormat),
                                  path=files[0] if len(files) == 1 else "")
            # shown, never on a screen: laid out and resized as in the app (a hidden window lays
            # out only when grabbed, after what its panes queue on a resize)
            window.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
            window.show()
            try:
                nothing_failed()
                yield window, nothing_failed
                nothing_failed()
            finally:  # destroyed now, not by the interpreter's shutdown, which would crash Qt's teardown
                import shiboken6

                for pane in window.panes:
                    if shiboken6.isValid(pane) and pane.parent() is None:  # taken out by --pane
                        shiboken6.delete(pane)
                shiboken6.delete(window)
    finally:
        sys.excepthook = hook


def _target_widget(window, pane: int | None):
    """The whole window, or pane ``pane`` (1-based) as a top-level widget that takes any size."""
    if pane is None:
        return window
    if not 1 <= pane <= len(window.panes):
        raise UserError(f"--pane {pane}: the view has {len(window.panes)} pane(s)")
    target = window.panes[pane - 1]
    target.setParent(None)
    target.show()
    return target


def cmd_screenshot(args: argparse.Namespace) -> int:
    """Render the main view (or one pane) headless, the playhead where asked, to a PNG or SVG."""
    from neuronviz.export import IMAGE_SUFFIXES, check_target, parse_size, write_image

    size = parse_size(args.size)
    check_target(args.output, IMAGE_SUFFIXES)
    with _headless_window(args.files, args.theme) as (window, nothing_failed):  # renamed into place when whole
        session = window.session
        if args.time_us is not None:
            session.set_playhead(args.time_us * 1e3 / session.max_duration_ns)
        else:
            session.set_playhead(args.at)
        write_image(_target_widget(window, args.pane), args.output, size, nothing_failed)
    print(f"wrote {args.output} ({size.width()}x{size.height()})")
    return 0


def _add_theme(p: argparse.ArgumentParser) -> None:
    p.add_argument("--theme", choices=("light", "dark"), default="light", help="colours (default light)")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None


def _fraction(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _add_screenshot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("screenshot", help="render the view to a PNG or SVG without a display")
    p.add_argument("files", nargs="*", help=f"{FILES_HELP} (default: the demo comparison)")
    p.add_argument("-o", "--output", required=True, help="output .png, or .svg for vector graphics")
    p.add_argument("--size", default="1600x900", help="WIDTHxHEIGHT in pixels (default 1600x900)")
    at = p.add_mutually_exclusive_group()
    at.add_argument("--at", type=_fraction, default=0.5, help="playhead as a fraction of the longest run")
    at.add_argument("--time-us", type=float, help="playhead time in microseconds")
    p.add_argument("--pane", type=_positive_int, help="render only this pane (1 = first)")
    _add_theme(p)
    p.set_defaults(func=cmd_screenshot)


def cmd_export(args: argparse.Namespace) -> int:
    """Convert trace files: every run of the inputs into one output file."""
    from sim.io import format_for, load_file, save_file

    traces = [t for path in args.files for t in load_file(path)]
    fmt = args.format or format_for(args.output)
    save_file(args.output, traces, fmt)
    events = sum(t.n_events for t in traces)
    print(f"wrote {args.output} ({fmt}, {len(traces)} run(s), {events:,} events)")
    return 0


def _add_export(sub: argparse._SubParsersAction) -> None:
    from sim.io import FORMATS

    p = sub.add_parser("export", help="convert trace files (to Chrome/Perfetto JSON, native, or the tables "
                                      "Neuron Explorer reads)")
    p.add_argument("files", nargs="+", help=FILES_HELP)
    p.add_argument("--format", choices=FORMATS, help="output format (default: from the output name: "
                                                      ".json or .json.gz is chrome, anything else nvtrace); "
                                                      "explorer writes a profile directory of Parquet tables")
    p.add_argument("-o", "--output", required=True, help="output file (a directory for explorer)")
    p.set_defaults(func=cmd_export)


def cmd_info(args: argparse.Namespace) -> int:
    """Print the runs in trace files."""
    from sim.io import load_file

    for i, path in enumerate(args.files):
        traces = load_file(path)
        if i:
            print()
        print(file_summary(path, traces))
    return 0


def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print the runs in trace files")
    p.add_argument("files", nargs="+", help=FILES_HELP)
    p.set_defaults(func=cmd_info)


def cmd_open(args: argparse.Namespace) -> int:
    return _open_app(args.files)


def _add_open(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("open", help="open trace files in the app (same as `neuronviz FILE...`)")
    p.add_argument("files", nargs="+", help=FILES_HELP)
    p.set_defaults(func=cmd_open)


def cmd_animate(args: argparse.Namespace) -> int:
    """The playback as an animated GIF or a numbered PNG sequence, rendered headless."""
    from neuronviz.export import check_target, frame_count, is_frame_folder, parse_size, write_animation

    size = parse_size(args.size)
    frame_count(args.fps, args.seconds, size)
    if not is_frame_folder(args.output):
        check_target(args.output, (".gif",))
    bar = TerminalBar(f"rendering {args.output}", "frames")
    with _headless_window(args.files, args.theme) as (window, nothing_failed):  # renamed into place when whole
        frames = write_animation(window.session, _target_widget(window, args.pane), args.output, args.fps,
                                 args.seconds, size, bar.count, nothing_failed)
    print(f"wrote {args.output} ({frames} frames, {size.width()}x{size.height()}, {args.fps} frames/s)")
    return 0


def _positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _add_animate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("animate", help="render the playback to an animated GIF or PNG frames without a display")
    p.add_argument("files", nargs="*", help=f"{FILES_HELP} (default: the demo comparison)")
    p.add_argument("-o", "--output", required=True, help="output .gif, or DIR/ for numbered PNG frames")
    p.add_argument("--fps", type=_positive_int, default=10, help="frames per second (default 10)")
    p.add_argument("--seconds", type=_positive_float, default=5.0,
                   help="length of the animation; the playhead sweeps the whole run (default 5)")
    p.add_argument("--size", default="1280x720", help="WIDTHxHEIGHT in pixels (default 1280x720)")
    p.add_argument("--pane", type=_positive_int, help="render only this pane (1 = first)")
    _add_theme(p)
    p.set_defaults(func=cmd_animate)


def _write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file, renamed)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def cmd_validate(args: argparse.Namespace) -> int:
    """Simulate the published measurements and print (or write) the accuracy report."""
    from sim.accuracy import accuracy_markdown, class_points
    from sim.validate import read_held_out, read_rows, report, summarise, validate
    from sim.validated import classes, errors_toml

    def chosen(rows: list) -> list:
        rows = [r for r in rows if r.model == args.model] if args.model else rows
        return rows[: args.limit] if args.limit else rows

    if args.errors and args.held_out:
        raise UserError("--errors takes the calibration rows and those never fitted on together: drop --held-out")
    rows = chosen(read_held_out() if args.held_out else read_rows())
    if not rows:
        raise UserError("no held-out rows match" if args.held_out else "no calibration rows match")
    results = validate(rows)
    held_out = validate(chosen(read_held_out())) if (args.output or args.errors) and not args.held_out else []
    if args.errors:
        _write_text(args.errors, errors_toml(classes(class_points(results + held_out))))
    if args.output:
        _write_text(args.output, accuracy_markdown(results, rows if args.fit else None, args.output, held_out))
    if args.output or args.errors:
        print(report(results).splitlines()[-1])
    else:
        print(report(results))
    s = summarise(results)
    return 0 if s.compared else EXIT_USAGE


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="compare the simulator with published Neuron measurements")
    p.add_argument("--model", help="only rows of this model")
    p.add_argument("--limit", type=_positive_int, help="only the first N rows")
    which = p.add_mutually_exclusive_group()
    which.add_argument("-o", "--output", help="write the report as Markdown to this file (the calibration rows and "
                                              "those never fitted on)")
    which.add_argument("--held-out", action="store_true",
                       help="the published rows no residual is fitted on (sim/calibration/held-out.csv) instead")
    p.add_argument("--errors", metavar="PATH", help="write each class's error (generation, software, dense or MoE, "
                   "metric) over the calibration rows and those never fitted on, as the views read it "
                   "(sim/calibration/errors.toml)")
    p.add_argument("--fit", action="store_true",
                   help="with -o: also fit the named residuals and check each generation fitted without its rows "
                        "(slow: tens of minutes)")
    p.set_defaults(func=cmd_validate)


def _name_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("names nothing")
    return names


NONE_WORD = "none"  # in a sweep's list: the option left unset (no quantization)


def _values_of(option: options.Option) -> Callable[[str], list]:
    """A sweep axis's argparse type: comma-separated values of ``option``, each read and checked
    as the option's declaration says."""
    number = {options.INT: int, options.FLOAT: float}.get(option.kind)
    one = _checked(number, option) if number else None

    def parse(text: str) -> list:
        out = []
        for word in _name_list(text):
            if option.none is not None and word == NONE_WORD:
                out.append(None)
            elif one is not None:
                out.append(one(word))
            elif option.kind == options.CHOICE and word not in map(str, option.choices):
                raise argparse.ArgumentTypeError(f"'{word}': choose from {', '.join(map(str, option.choices))}")
            else:
                out.append(word)
        return out

    return parse


# the sweep's axes, each a run option: its flag in a sweep (a list of instances is --instances)
SWEEP_AXES = {"model": "--model", "instance": "--instances", "batch": "--batch", "seq": "--seq", "cores": "--cores",
              "dtype": "--dtype", "mode": "--mode", "nodes": "--nodes", "quant": "--quant"}


def cmd_sweep(args: argparse.Namespace) -> int:
    """Simulate every combination of the lists given into a Parquet or CSV file."""
    from sim.sweep import Journal, grid, sweep

    engine = args.engine or ("dask" if args.scheduler else "local")
    if args.scheduler and engine != "dask":
        raise UserError("--scheduler is a Dask scheduler's address: it goes with --engine dask")
    points = grid(args.model, args.instance, args.batch, args.seq, args.cores, args.dtype, args.mode, args.nodes,
                  args.new_tokens, args.quant)
    try:
        new, total = sweep(points, args.output, args.resume, engine, args.scheduler or args.address, args.workers,
                           TerminalBar("sweep", "configurations"))
    except KeyboardInterrupt:  # during the final write the rows stay in the journal (and what the file had)
        output, journal = Path(args.output), Journal(Path(args.output))
        kept = [str(output)] * output.exists() + [str(journal.folder)] * bool(journal.parts)
        where = f"the finished rows are in {' and '.join(kept)}" if kept else "no rows were finished"
        print(f"\ninterrupted: {where}; run the same command with --resume to go on", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"wrote {args.output}: {total} rows ({new} simulated now)")
    return 0


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    from sim.sweep import ENGINES

    p = sub.add_parser("sweep", help="simulate every combination of models, instances, batches... into a table")
    for name, flag in SWEEP_AXES.items():  # each axis a run option, read as its declaration says
        option, required = options.BY_NAME[name], name in ("model", "instance")
        unset = f"; {NONE_WORD}: {option.none}" if option.none and not required else ""
        p.add_argument(flag, dest=name, type=_values_of(option), action="extend" if name == "model" else "store",
                       required=required, default=None if required else [option.default],
                       help=f"comma-separated, every combination simulated: {option.help}{unset}")
    new_tokens = options.BY_NAME["new_tokens"]
    p.add_argument(new_tokens.flag, type=_checked(int, new_tokens), default=new_tokens.default, help=new_tokens.help)
    p.add_argument("-o", "--output", required=True, help="results file: .parquet, or .csv")
    p.add_argument("--resume", action="store_true", help="keep the rows already in the file and in its "
                   "journal (.NAME.parts beside it, left by a sweep that was stopped) and run the rest")
    p.add_argument("--workers", type=_positive_int, help="local processes (default: this machine's cores)")
    p.add_argument("--engine", choices=ENGINES, help="where to run: local processes (default), dask or ray")
    p.add_argument("--scheduler", help="a Dask distributed scheduler's address (implies --engine dask)")
    p.add_argument("--address", help="a Ray cluster's address (default: start a local one)")
    p.set_defaults(func=cmd_sweep)


def cmd_best(args: argparse.Namespace) -> int:
    """The best configuration per instance and overall, and the latency-cost frontier."""
    from sim.sweep import METRICS, best, candidates, frontier, read_results

    table = read_results(args.file)
    ok = candidates(table, args.max_latency_ms, args.min_throughput)
    per_instance, overall = best(ok, args.metric)
    front = frontier(ok)
    if args.json:
        json.dump({"metric": METRICS[args.metric][0], "best": overall, "per_instance": per_instance,
                   "frontier": front}, sys.stdout, indent=1)
        print()
        return 0 if overall else EXIT_USAGE
    errors = table.num_rows - sum(1 for s in table["status"].to_pylist() if s == "ok")
    print(f"{args.file}: {table.num_rows} configurations, {errors} could not run, {ok.num_rows} meet the limits")
    if overall is None:
        print("no configuration meets the limits")
        return EXIT_USAGE
    unpriced = sorted({r["instance"] for r in ok.to_pylist() if r.get("price_usd_per_hour") is None})
    if unpriced and args.metric == "cost":
        print(f"not ranked by cost (no price in the data): {', '.join(unpriced)}")
    print(f"\nbest by {args.metric} ({METRICS[args.metric][0]}), per instance:")
    print(_rows_table(per_instance))
    print("\nbest overall:")
    print(_rows_table([overall]))
    print("\nPareto frontier (nothing is both faster and cheaper):")
    print(_rows_table(front))
    return 0


BEST_COLUMNS = (("instance", "instance", "s"), ("model", "model", "s"), ("mode", "mode", "s"),
                ("batch", "batch", "d"), ("seq", "seq", "d"), ("cores_per_copy", "cores", "d"),
                ("dtype", "dtype", "s"), ("nodes", "nodes", "d"), ("latency_ms", "latency ms", ",.2f"),
                ("throughput_per_s", "throughput/s", ",.1f"), ("cost_per_million_inferences_usd", "$/M inf", ",.3f"),
                ("cost_per_million_tokens_usd", "$/M tok", ",.3f"))


def _rows_table(rows: list[dict]) -> str:
    def cell(value, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    cells = [[title for _, title, _ in BEST_COLUMNS]]
    cells += [[cell(r.get(key), fmt) for key, _, fmt in BEST_COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(BEST_COLUMNS))]
    return "\n".join("  ".join(c.rjust(w) if j > 2 else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths,
                                                                                                 strict=True)))
                     for row in cells)


def _add_best(sub: argparse._SubParsersAction) -> None:
    from sim.sweep import METRICS

    p = sub.add_parser("best", help="the best configurations of a sweep and its latency-cost frontier")
    p.add_argument("file", help="results file of `neuronviz sweep` (.parquet or .csv)")
    p.add_argument("--max-latency-ms", type=_positive_float, help="only configurations this fast or faster")
    p.add_argument("--min-throughput", type=_positive_float, help="only configurations with this throughput or more")
    p.add_argument("--metric", choices=tuple(METRICS), default="cost", help="what 'best' means (default cost)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.set_defaults(func=cmd_best)


def cmd_report(args: argparse.Namespace) -> int:
    """Why each run takes its time: summary, layer table and insights, as text, JSON or CSV."""
    import csv
    import io

    from neuronviz.report import analysis_text
    from sim.analysis import LAYER_FIELDS, analyse, report_record
    from sim.io import load_file
    from sim.io.atomic import atomic_file
    from sim.validated import headline_text

    if args.csv and not args.output:
        raise UserError("--csv writes a file: give it with -o FILE")
    traces = [t for path in args.files for t in load_file(path)]
    analyses = [analyse(t) for t in traces]
    records = [report_record(t, [o for o in traces if o is not t], a, [b for b in analyses if b is not a])
               for t, a in zip(traces, analyses, strict=True)]
    for t, rec in zip(traces, records, strict=True):  # how far its headline figures can be trusted
        rec["validated"], rec["validated_text"] = headline_record(t), headline_text(t)
    if args.csv:
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(["run", "chip", "instance", *LAYER_FIELDS])
        for i, rec in enumerate(records, 1):
            for layer in rec["layers"]:
                writer.writerow([i, rec["chip"], rec["instance"], *(layer[f] for f in LAYER_FIELDS)])
        with atomic_file(Path(args.output)) as f:
            f.write(text.getvalue().encode("utf-8"))
        print(f"wrote {args.output}: {sum(len(r['layers']) for r in records)} layers of {len(records)} run(s)")
    elif args.json:
        json.dump({"runs": records}, sys.stdout, indent=1)
        print()
    else:
        print("\n\n".join(analysis_text(i, rec) for i, rec in enumerate(records, 1)))
    return 0


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="why each run takes its time: summary, layers, insights")
    p.add_argument("files", nargs="+", help=f"{FILES_HELP}; runs are compared with each other")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--csv", action="store_true", help="write every run's layer table to -o FILE (a run column)")
    p.add_argument("-o", "--output", help="with --csv: the CSV file")
    p.set_defaults(func=cmd_report)


def cmd_compare(args: argparse.Namespace) -> int:
    """A device profile beside the simulation of the same run: figures and blocks, how far apart."""
    import csv
    import io

    from sim.compare import compare, csv_rows, simulation_config, table_text
    from sim.io import load_file
    from sim.io.atomic import atomic_file

    traces = load_file(args.profile)
    if len(traces) != 1:
        raise UserError(f"{args.profile}: holds {len(traces)} runs; compare takes the one a device measured")
    (measured,) = traces
    if not measured.run.measured:
        print(f"neuronviz: note: {args.profile} gives no measured figures (not a Neuron Explorer profile): its "
              "events are compared", file=sys.stderr)
    cfg = simulation_config(measured, option_values(args))
    simulated = simulate(cfg)
    rows = compare(measured, simulated)
    d = simulated.run
    print(f"measured: {args.profile} ({measured.run.deployment.instance or 'instance not known'}) · simulated: "
          f"{d.workload.model} {d.workload.mode} batch {d.workload.batch} seq {d.workload.seq} on "
          f"{d.deployment.instance}\n")
    print(table_text(rows))
    if args.output:
        text = io.StringIO()
        records = csv_rows(rows)
        writer = csv.DictWriter(text, fieldnames=list(records[0]) if records else ["kind"])
        writer.writeheader()
        writer.writerows(records)
        with atomic_file(Path(args.output)) as f:
            f.write(text.getvalue().encode("utf-8"))
        print(f"\nwrote {args.output}: {len(rows)} rows")
    return 0


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="a Neuron Explorer profile beside the simulation of the same run")
    p.add_argument("profile", help="a Neuron Explorer profile directory (or a trace file of one run)")
    add_run_options(p)
    p.add_argument("-o", "--output", help="also write the rows to this CSV file")
    p.set_defaults(func=cmd_compare)


COMMANDS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "simulate": _add_simulate,
    "info": _add_info,
    "export": _add_export,
    "open": _add_open,
    "screenshot": _add_screenshot,
    "animate": _add_animate,
    "validate": _add_validate,
    "sweep": _add_sweep,
    "best": _add_best,
    "report": _add_report,
    "compare": _add_compare,
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="neuronviz",
        description="Simulate AWS Neuron chips and watch what their engines do. "
                    "Without a command, opens the app (on a demo comparison when no file is given).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("models", help="list the model presets").set_defaults(func=cmd_models)
    sub.add_parser("chips", help="list the chip generations and instances").set_defaults(func=cmd_chips)
    for add in COMMANDS.values():
        add(sub)
    return parser


def _fail(message: str) -> int:
    print(f"neuronviz: error: {message}", file=sys.stderr)
    return EXIT_USAGE


TRACE_SUFFIXES = (".nvtrace", ".json", ".gz")


def _looks_like_a_file(word: str) -> bool:
    """``neuronviz FILE...`` opens files: a word that names one (or has a trace file's suffix, so a
    missing file gets the app's own message), not a mistyped command."""
    return Path(word).exists() or word.lower().endswith(TRACE_SUFFIXES)


def _not_files(words: Sequence[str]) -> str | None:
    """Why the app cannot open ``words`` as files (an empty name, a folder), or None: said on the
    command line, before a window opens."""
    for word in words:
        if not word:
            return "'' is not a file name"
        if Path(word).is_dir() and profile_of(word) is None and csv_export_of(word) is None:
            return f"{word}: is a directory, not a trace file or a Neuron Explorer profile (no Metadata.parquet in it)"
    return None


def _open_app(files: Sequence[str]) -> int:
    problem = _not_files(files) or binding_problem()
    if problem:
        return _fail(problem)
    from neuronviz.app import run_app

    return run_app(list(files))


class _OutputError(Exception):
    """Standard output could not be written (a full disk, a closed pipe): not the command's fault."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


class _GuardedOutput:
    """Standard output whose write errors are told apart from a command's own."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise _OutputError(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _OutputError(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _write_anyway(error: UnicodeEncodeError) -> tuple[str | bytes, int]:
    """What standard output and error write for characters their encoding lacks (an ASCII or C
    locale): a file name's undecodable bytes as they were, anything else as a Python escape."""
    try:
        return codecs.lookup_error("surrogateescape")(error)
    except UnicodeError:
        return codecs.lookup_error("backslashreplace")(error)


codecs.register_error("neuronviz-output", _write_anyway)


def _readable_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="neuronviz-output")


def _discard_output() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush of what could not be
    written does not fail again (with a traceback) as it exits."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def _terminated(signum: int, frame) -> NoReturn:
    raise SystemExit(SIGNAL_EXIT + signum)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _readable_streams()
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl+C: whatever was being written is removed as it unwinds
        return EXIT_INTERRUPTED


def _main(argv: list[str]) -> int:
    parser = build_parser()
    commands = ("models", "chips", *COMMANDS)
    if not argv or (argv[0] not in commands and not argv[0].startswith("-") and _looks_like_a_file(argv[0])):
        return _open_app(argv)
    if argv[0] not in commands and not argv[0].startswith("-"):
        return _fail(f"unknown command '{argv[0]}' (and no such file): choose one of {', '.join(commands)}, "
                     "or give trace files to open")
    args = parser.parse_args(argv)
    if args.func is cmd_open:
        return cmd_open(args)
    stdout, sys.stdout = sys.stdout, _GuardedOutput(sys.stdout)
    terminate = signal.signal(signal.SIGTERM, _terminated)  # a save in progress removes its temporary file
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except (SimError, UserError) as exc:
        return _fail(str(exc))
    except _OutputError as exc:
        _discard_output()
        if isinstance(exc.error, BrokenPipeError):  # the reader has gone (| head): nothing to tell it
            return 0
        return _fail(f"cannot write to standard output: {exc}")
    finally:
        sys.stdout = stdout
        signal.signal(signal.SIGTERM, terminate)
