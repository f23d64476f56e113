"""The ``localpriv`` command line: perturb -> aggregate -> estimate, plus inspection and
reproductions. A thin layer: each command (one module of :mod:`localpriv.cli`) parses its options,
calls one library function and renders the result; :mod:`localpriv.cli.common` holds what they share.

Commands are loaded on first use (:data:`COMMANDS`), so ``localpriv --help`` imports none of the
library. Errors are one unwrapped line on stderr (``error: ...``) with exit code 1 for bad input and
2 for bad usage (unknown option, a value of the wrong type); ``--debug`` shows the traceback instead.
Outputs are written atomically (see :mod:`localpriv.data.formats`): a failed or interrupted command
leaves no output file.
"""
from __future__ import annotations

import importlib
import sys
import traceback
import warnings

import typer

# typer >= 0.25 vendors click: its exceptions live here (no separate click package)
from typer._click.exceptions import UsageError

from localpriv.cli.common import STATE, App, LazyGroup, fmt_number, message, say, show_warning, usage_message
from localpriv.utils.signals import interrupt_cleanly, pending_exit

__all__ = ["app", "main", "COMMANDS", "fmt_number"]

#: command name -> (module, function, summary on the ``localpriv --help`` page: the first paragraph
#: of the function's docstring), in the order of that page
COMMANDS: dict[str, tuple[str, str, str]] = {
    "perturb": ("localpriv.cli.perturb", "perturb",
                  "Obfuscate a column of values: one report per value (streamed in bounded memory); with "
                  "--mechanism-column or --policy each row applies its own mechanism (free will)."),
    "client": ("localpriv.cli.client", "client",
               "Perturb values on this machine with the portable protocol: one report per input line, as JSON."),
    "domain": ("localpriv.cli.domain", "domain",
               "List the distinct values of a column with their counts, on the data owner's side: to review and "
               "write a domain (--out labels.txt for --domain @labels.txt). Never learn a domain from other "
               "people's data: the set of values is itself information about them (docs/cli.md)."),
    "aggregate": ("localpriv.cli.aggregate", "aggregate",
                    "Count reports per (mechanism, report); counts files among the inputs are summed."),
    "estimate": ("localpriv.cli.estimate", "estimate",
                   "Estimate the original distribution from reports or counts (with --ci and --stat: how sure)."),
    "query": ("localpriv.cli.query", "query",
              "Answer marginal and range queries on a joint estimate, with intervals (from reports or counts)."),
    "mechanism": ("localpriv.cli.analyze", "mechanism",
                    "Summarize a mechanism's channel and its privacy level computed from it."),
    "analyze": ("localpriv.cli.analyze", "analyze",
                  "Privacy level (LDP or metric), identifiability and the error bounds that apply; with --consistency, "
                  "the consistency report of seed 001 section 6 with an empirical study; with --shuffle N --delta D, "
                  "the central level after a shuffler (numerical and closed form)."),
    "advise": ("localpriv.cli.advise", "advise",
                 "Rank the mechanisms that meet a privacy target by predicted error; recommend one and say why."),
    "reproduce": ("localpriv.cli.reproduce", "reproduce",
                    "Rerun one of the seeds' experiments: writes OUT/NAME.json and OUT/NAME.png."),
    "demo": ("localpriv.cli.reproduce", "demo",
               "The main job: UCI Adult ages under k-RR eps=2, estimated by INV-N, INV-P and IBU."),
    "serve": ("localpriv.cli.serve", "serve",
                "Run the collector service: HTTP API, counts in SQLite or PostgreSQL, estimates, a dashboard "
                "(docs/service.md)."),
    "heavy-hitters": ("localpriv.cli.heavy_hitters", "heavy_hitters_",
                        "Find the top-k strings of a column under LDP (users simulated from the file), with their "
                        "estimated frequencies and intervals (docs/heavy-hitters.md)."),
    "ledger": ("localpriv.cli.ledger", "ledger",
               "Show a privacy ledger: totals per collection, per mechanism spec and overall (basic composition and "
               "the PLD accountant's (eps, delta)), and what the total means."),
    "audit": ("localpriv.cli.audit", "audit_",
              "Audit a client: a lower confidence bound on the LDP level it delivers, beside the level its spec "
              "claims (exit status 3 when the bound exceeds it)."),
    "list": ("localpriv.cli.listing", "list_",
               "List the registered mechanisms (spec names), estimators and reproducible experiments."),
}


class Commands(LazyGroup):
    """The ``localpriv`` commands, each imported when it runs."""

    lazy = COMMANDS


# plain (click) help pages: the Rich ones load typer.rich_utils, Markdown and Pygments, which alone
# cost more than the 0.25 s of CPU `localpriv --help` may take
app = App(cls=Commands, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
          rich_markup_mode=None, context_settings={"max_content_width": 110},
          help="Local privacy: obfuscate values, aggregate reports, estimate distributions.")


def _version(value: bool) -> None:
    if value:
        print(f"localpriv {importlib.import_module('localpriv').__version__}")
        raise typer.Exit(0)


@app.callback()
def _main_options(debug: bool = typer.Option(False, "--debug", help="show tracebacks of errors"),
                  version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                               help="print the version and exit")) -> None:
    """Local privacy: obfuscate values, aggregate reports, estimate distributions."""
    STATE["debug"] = debug


def main(argv: list[str] | None = None) -> None:  # entry point
    """Run the command line: one-line errors, exit 1 for bad input and 2 for bad usage."""
    interrupt_cleanly()
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    if not debug:
        warnings.showwarning = show_warning
    try:
        # without standalone mode, click *returns* the code of a typer.Exit instead of raising it
        code = app(args=argv, standalone_mode=False, prog_name="localpriv")
        if pending_exit() is not None:  # interrupted, but the exception was swallowed somewhere
            say("error: interrupted")
            sys.exit(pending_exit())
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `localpriv` alone: the help page, as it is
            sys.stdout.write(exc.format_message().rstrip() + "\n")
            sys.exit(2)
        if debug:
            traceback.print_exc()
        hint = f" (see localpriv {exc.ctx.info_name} --help)" if exc.ctx is not None and \
            exc.ctx.info_name not in (None, "localpriv") else " (see localpriv --help)"
        say(f"error: {usage_message(exc)}{hint}")
        sys.exit(2)
    except typer.Abort:
        say("error: interrupted")
        sys.exit(130)
    except KeyboardInterrupt:
        say("error: interrupted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - outside a command (e.g. at start-up): still one line
        if debug:
            traceback.print_exc()
        say(f"error: {message(exc)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
