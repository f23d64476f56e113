"""What every command of the ``localpriv`` command line shares: the Typer app's classes (tidy
--help pages, commands loaded on first use), one-line error rendering, progress and output helpers.

Imports nothing heavy (no NumPy, pandas, PyArrow): ``localpriv --help`` loads this module only.
Errors are one unwrapped line on stderr (``error: ...``) with exit code 1 for bad input and 2 for bad
usage; ``--debug`` shows the traceback instead.
"""
from __future__ import annotations

import functools
import importlib
import json
import math
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

# typer >= 0.25 vendors click: its exceptions live here (no separate click package)
from typer._click.exceptions import UsageError

from localpriv.utils.errors import LocalPrivError, SettingError, missing_extra
from localpriv.utils.progress import Status


class LazyConsole:
    """A ``rich.console.Console`` made on first use (importing Rich's console is a good part of the
    start-up that ``--help`` need not pay); every attribute and ``with`` go to the real one."""

    def __init__(self, **kwargs):
        object.__setattr__(self, "_kwargs", kwargs)
        object.__setattr__(self, "_real", None)

    def _console(self):
        if self._real is None:
            from rich.console import Console
            object.__setattr__(self, "_real", Console(**self._kwargs))
        return self._real

    def __getattr__(self, name):
        return getattr(self._console(), name)

    def __setattr__(self, name, value):
        setattr(self._console(), name, value)

    def __enter__(self):
        return self._console().__enter__()

    def __exit__(self, *exc):
        return self._console().__exit__(*exc)


def Table(*args, **kwargs):  # noqa: N802 - rich.table.Table, imported when a table is drawn
    from rich.table import Table as _Table
    return _Table(*args, **kwargs)

#: placeholders of option values on the --help pages, by the option's Python type
METAVARS = {"Path": "PATH", "str": "TEXT", "int": "INTEGER", "float": "NUMBER"}


class Command(typer.core.TyperCommand):
    """A command whose --help page names values the usual way: ``INPUT``, ``--out PATH``, flags
    without a placeholder (typer's defaults print ``{input}``, ``<path>`` and ``<bool>``)."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for p in params:
            if p.metavar is None and p.param_type_name == "option" and not getattr(p, "is_flag", False):
                ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
                p.metavar = METAVARS.get(getattr(ann, "__name__", ""), "VALUE")
        return params

    def collect_usage_pieces(self, ctx):
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name == "argument":
                name = (p.metavar or p.name).upper() + ("..." if p.nargs != 1 else "")
                pieces.append(name if p.required else f"[{name}]")
        return pieces

    def format_options(self, ctx, formatter):
        args, opts = [], []
        for p in self.get_params(ctx):
            rec = p.get_help_record(ctx)
            if rec is None:
                continue
            if p.param_type_name == "argument":
                args.append(((p.metavar or p.name).upper() + ("..." if p.nargs != 1 else ""), rec[1]))
            else:
                opts.append(rec)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class App(typer.Typer):
    """Every command is a :class:`Command` (tidy --help pages, whoever adds the command)."""

    def command(self, name: str | None = None, *, cls: Any = None, **kwargs: Any) -> Callable:
        return super().command(name, cls=cls or Command, **kwargs)


class LazyGroup(typer.core.TyperGroup):
    """A command group whose commands are loaded on first use: ``lazy`` maps each command name to
    ``(module, function, summary)``; the module is imported (by name) only when the command runs or
    shows its own help page (the function's docstring), so ``localpriv --help`` loads none of the
    library and lists the commands by their summary (the docstring's first paragraph)."""

    lazy: dict[str, tuple[str, str, str]] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands) + [name for name in self.lazy if name not in self.commands]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, function, _summary = self.lazy[cmd_name]
            callback = getattr(importlib.import_module(module), function)
            info = typer.models.CommandInfo(name=cmd_name, cls=Command, callback=callback)
            self.commands[cmd_name] = typer.main.get_command_from_info(info, pretty_exceptions_short=True,
                                                                      rich_markup_mode=None)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands and their one-line help, without loading them."""
        rows = []
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names) if names else 0
        for name in names:
            cmd = self.commands.get(name) or typer.core.TyperCommand(name, help=self.lazy[name][2])
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


console = LazyConsole()
err = LazyConsole(stderr=True, soft_wrap=True)
#: the options of the whole command line (``--debug``)
STATE = {"debug": False}


def friendly(func):
    """Turn every error of a command into one line on stderr and exit code 1 (the traceback with
    ``--debug``); usage errors (exit 2) are handled by :func:`main`."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, UsageError):
            raise
        except SettingError as exc:  # a bad value of one setting: a usage error of its option
            raise typer.BadParameter(str(exc), param_hint=f"'--{exc.setting.replace('_', '-')}'") from None
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            if STATE["debug"]:
                traceback.print_exc()
            say(f"error: {message(exc)}")
            raise typer.Exit(1) from None
    return wrapper


def message(exc: BaseException) -> str:
    """An error in one line for users."""
    if isinstance(exc, LocalPrivError):
        return str(exc)
    extra = missing_extra(exc)
    if extra is not None:
        return str(extra)
    if isinstance(exc, OSError):
        return os_message(exc)
    if isinstance(exc, MemoryError):
        return "out of memory"
    return f"internal error ({type(exc).__name__}: {exc}); rerun with --debug for the traceback"


def say(text: str) -> None:
    """One line on stderr, never wrapped (whatever the terminal width)."""
    sys.stderr.write(re.sub(r"\s*\n\s*", " ", text).rstrip() + "\n")
    sys.stderr.flush()


def rich_progress(status: Status | None = None) -> Any:
    """An experiments' progress callable (what ``reproductions.runner.Progress`` wraps): every
    ``progress(items, "label")`` of an experiment becomes a counted task of ``status`` (a
    :class:`localpriv.utils.progress.Status`: a bar on a terminal, a status line every ~10 s otherwise);
    without one, each loop gets its own."""

    def progress(iterable, description="", total=None):
        if status is not None:
            yield from status.track(iterable, description, total)
            return
        with status_of(description or "progress") as own:
            yield from own.track(iterable, description, total)
    return progress


DOMAIN_HELP = ("LO..HI, comma-separated labels, @FILE (labels one per line, commas allowed), "
               "bbox(lat0,lon0,lat1,lon1,cell_km) (a grid of cell_km-km cells "
               "covering a lat/lon box), manhattan[:CELL_KM] or grid(lat0=..,lon0=..,nrows=..,ncols=..,cell_km=..)")


def status_of(label: str, stage: str = "") -> Status:
    """Progress of a long command on stderr: a Rich display on a terminal (after 1.5 s), one status
    line about every 10 s otherwise (:class:`localpriv.utils.progress.Status`)."""
    return Status(label, stage, console=err)


def inputs_text(inputs: list) -> str:
    return str(inputs[0]) if len(inputs) == 1 else f"{len(inputs)} inputs"


def fmt_number(value: Any, digits: int = 4) -> str:
    """A number for people: ``digits`` significant digits (epsilons and error bounds), thousands
    grouped, no float noise (0.05000000000000071 -> 0.05, 1.9999999999999996 -> 2), exponent
    notation below 0.001 and from 10^6; integers exact; booleans yes/no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
        return f"{int(value):,}"
    v = float(value)
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-3 <= a < 1e6:
        decimals = max(0, digits - 1 - math.floor(math.log10(a)))
        text = f"{round(v, decimals):,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{v:.{digits}g}"


def fmt_value(value: Any) -> str:
    """A report value for a table: numbers by :func:`fmt_number`, lists of numbers element-wise."""
    if isinstance(value, (bool, int, float)) or hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0:
        return fmt_number(value)
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else list(value)
        return "[" + ", ".join(fmt_value(v) for v in items) + "]"
    return str(value)


def report_table(title: str, report: dict) -> Any:
    """Key/value rows (nested dicts as indented rows) as a Rich table."""
    table = Table(title=title, show_header=False, title_justify="left", expand=False)
    table.add_column("what", style="bold", overflow="fold", max_width=48)
    table.add_column("value", overflow="fold")
    for key, value in report.items():
        if isinstance(value, dict):
            table.add_row(key, "")
            for sub, v in value.items():
                table.add_row(f"  {sub}", fmt_value(v))
        else:
            table.add_row(key, fmt_value(value))
    return table


def print_json(report: dict) -> None:
    """Valid JSON on stdout, full precision (non-finite numbers as the strings inf, -inf, nan)."""
    sys.stdout.write(json.dumps(_finite(report), indent=2, default=_jsonable, allow_nan=False) + "\n")
    sys.stdout.flush()


def _finite(obj):
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return _finite(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if obj != obj else ("inf" if obj > 0 else "-inf")
    return obj


def _jsonable(obj):
    import numpy as np
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def usage_message(exc: UsageError) -> str:
    """The usage error in words: several files where a command reads one say so."""
    msg = exc.format_message()
    m = re.match(r"Got unexpected extra argument(?:\(s\)|s)? \((.*)\)$", msg)
    name = exc.ctx.info_name if exc.ctx is not None else None
    if m and name == "perturb":
        extra = m.group(1).split()
        return (f"perturb reads one values file, but {len(extra) + 1} were given (also: {', '.join(extra[:3])}"
                f"{', ...' if len(extra) > 3 else ''}); perturb each into its own report file, then aggregate or "
                "estimate them together (those take many files and globs)")
    return msg


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning is one line on stderr too (``warning: ...``), without the source line."""
    where = f" ({category.__name__}, {Path(filename).name}:{lineno})" if not issubclass(category, UserWarning) \
        else ""
    say(f"warning: {message}{where}")


def os_message(exc: OSError) -> str:
    """An operating-system error: the file and why."""
    name = getattr(exc, "filename", None)
    why = exc.strerror or str(exc)
    return f"{name}: {why}" if name else why
