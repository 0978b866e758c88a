"""benchflow's Snakemake logger plugin: `snakemake --logger benchflow` (Makefile, profiles).

An adapter: it turns Snakemake's log records into calls of workflow.commands.progress's
`Progress` and prints the events it returns (render/progress.py says what they are).
Snakemake finds it by its module name's prefix, snakemake_logger_plugin_.

Modes (`--logger-benchflow-format`):
- text (default): Snakemake's own messages as its default handler writes them, less its
  "Finished jobid" and "N of M steps" lines (the ETA line says the same and more), plus
  a line per finished case and A/B row, the ETA after each finished job, the summary at
  the end. Colours (rich) on a terminal only: a pipe or file gets plain text.
- quiet: the summary on stdout; of Snakemake's messages only warnings and errors (a
  failed job's block with its log), on stderr, so that a failure is never silent.
- json: one JSON object per line on stdout (events case, ab, eta, summary) for CI;
  Snakemake's warnings and errors on stderr, so stdout stays parseable.

Text from outside (a tool's error, a case id, a dispatch name, a job's log in Snakemake's
error block) is printed with its control characters escaped (render/text.printable) in
text and quiet modes: a terminal would obey them (clear the screen, set its title). JSON
escapes them itself. A reader that goes away (`| head -1`) ends our output to that stream,
quietly: the run goes on to its end (its results are kept), printing nothing more there.
A stream that cannot be written (a full disk, /dev/full) gets the same, with one line on
stderr saying so, and the run exits 1.

The terminal as it is: NO_COLOR (or --nocolor) prints no escape sequence at all; a width
of 0 (COLUMNS=0, a terminal that reports 0 columns) is taken as 80, since rich prints
nothing at width 0. Ctrl-C in Snakemake's command line: one `interrupted:` line and a
summary that names no earlier report as this run's, instead of Snakemake's error blocks
for the jobs it stopped, and exit status 130 (128 + SIGINT, as a shell reports it). A
SIGTERM (a CI job cancelled, `kill`) the same, exit 143: Snakemake's own answer to it
waits for the running jobs to finish (minutes), or, when the jobs got it too, reports
each as failed; here its jobs are stopped at once, as on Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text
from snakemake.logging import DefaultFilter
from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from snakemake_logger_plugin_benchflow.config_args import is_snakemake_cli, refuse_bad_config
from workflow.commands.progress import Progress
from workflow.commands.progress_text import summary_lines
from workflow.render.progress import ab_text, case_text, eta_text
from workflow.render.text import printable

# Snakemake imports this plugin while it builds its argument parser, before it parses
# --config: an override it would refuse with a traceback is refused here in one line.
refuse_bad_config(sys.argv)

FORMATS = ("text", "quiet", "json")
# A case line's colour on a terminal, by status (a regression's case is "degraded").
STYLES = {"ok": "green", "degraded": "yellow", "failed": "bold red", "unsupported": "dim",
          "skipped": "dim", "compile-only": "cyan"}
# Replaced by the ETA line in text mode.
DROPPED_IN_TEXT = (LogEvent.PROGRESS, LogEvent.JOB_FINISHED)
# rich's width when the environment gives it none it can print at (COLUMNS=0).
FALLBACK_WIDTH = 80
# Exit statuses the logger sets at the run's end: after Ctrl-C, 128 + SIGINT (what a
# shell reports for an interrupted tool, and what `benchflow` exits with), after SIGTERM
# 128 + SIGTERM; when its own output could not be written, 1, as any tool whose output
# failed.
INTERRUPTED = 130
OUTPUT_LOST = 1


class _Console(Console):
    """rich's Console, but a reader that went away is the handler's to deal with: rich's
    own answer is SystemExit(1), which would end Snakemake's run in the middle."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # rich drops what it would print from now on
        raise BrokenPipeError


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    format: str = field(default="text", metadata={
        "help": "text: live lines and a summary; quiet: only the summary; json: one JSON "
                "event per line on stdout (case, ab, eta, summary)",
        "choices": FORMATS, "type": str})


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        self.mode = getattr(self.settings, "format", "text") or "text"
        if self.mode not in FORMATS:
            raise ValueError(f"--logger-benchflow-format: {self.mode!r}; expected one of "
                             f"{', '.join(FORMATS)}")
        cs = self.common_settings
        # NO_COLOR (no-color.org: set and not empty) as --nocolor: not only rich's
        # colours, its bold and dim too, so that no escape sequence is printed.
        self.plain = bool(cs.nocolor) or os.environ.get("NO_COLOR", "") != ""
        own = sys.stdout if cs.stdout else sys.stderr
        self.out = self._console(own if self.mode == "text" else sys.stdout)
        self.err = self._console(own if self.mode == "text" else sys.stderr)
        # Snakemake's default filter (--quiet, --printshellcmds, ...) decides which of its
        # messages print; the progress is told every event, even with --quiet.
        self.shown = DefaultFilter(cs.quiet, cs.debug_dag, cs.verbose, cs.dryrun,
                                   cs.printshellcmds)
        self.progress = Progress()
        # Where the user typed the command: Snakemake makes its loggers before it changes
        # to --directory, and the `cwd` of its WORKFLOW_STARTED record is already that
        # directory, so the closing `reports:` line would be relative to the wrong one.
        self.typed_in = os.getcwd()
        self.started = self.errors = self.closed = self.interrupted = False
        self.gone: set[int] = set()  # the descriptors whose reader went away (EPIPE)
        self.lost = False  # whether a stream of ours could not be written (not EPIPE)
        # Only Snakemake's own command line ends with our exit status and hears Ctrl-C
        # through us (a test or a script that imports the plugin keeps its own).
        self.exits = is_snakemake_cli(sys.argv[0] if sys.argv else "")
        self.previous_sigint = None
        self.signum = signal.SIGINT  # the signal that interrupted the run
        if self.exits:
            self._hear_sigint()

    def _console(self, file) -> Console:
        # soft_wrap: rich would otherwise wrap long lines at 80 columns in a pipe.
        console = _Console(file=file, soft_wrap=True, highlight=False,
                           no_color=self.plain or None)
        if console.width < 1:  # COLUMNS=0: rich would print nothing at all
            console.width = FALLBACK_WIDTH
        return console

    def _style(self, style: str) -> str:
        return "" if self.plain else style

    def _hear_sigint(self) -> None:
        """Notes Ctrl-C, then lets Python's handler raise KeyboardInterrupt as before
        (Snakemake's scheduler stops its jobs on it). Only where Python's own handler is
        in place: a SIGINT ignored (a background job) stays ignored; signals are set in
        the main thread only (Snakemake makes its loggers there)."""
        if threading.current_thread() is not threading.main_thread() \
                or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return

        def heard(signum, frame) -> None:
            if not self.interrupted:
                self.signum = signum
            self.interrupted = True
            signal.default_int_handler(signum, frame)

        self.previous_sigint = signal.signal(signal.SIGINT, heard)
        self.previous_sigterm = signal.signal(signal.SIGTERM, heard)
        _term_as_interrupt(heard)

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        if self.interrupted and not self.progress.interrupted:
            self.progress.interrupt()
        # Apart: a message that cannot be shown must not lose the progress, and a bug
        # here must not stop the run (logging reports it on stderr).
        try:
            self._snakemake_message(record, event)
        except Exception:
            self.handleError(record)
        try:
            for out in self._track(record, event):
                self._print(out)
        except Exception:
            self.handleError(record)

    def _snakemake_message(self, record: logging.LogRecord, event) -> None:
        # A job's error counts when no retry finishes it (Progress.failed); any other
        # error fails the run.
        if record.levelno >= logging.ERROR and event != LogEvent.JOB_ERROR:
            self.errors = True
        if not self.shown.filter(record):
            return
        if self.mode == "text" and event in DROPPED_IN_TEXT:
            return
        if self.mode != "text" and record.levelno < logging.WARNING:
            return
        # After Ctrl-C, Snakemake's errors are the interrupt's (each job it stopped, "At
        # least one job did not complete"): the interrupted line says it instead.
        if self.interrupted and record.levelno >= logging.ERROR:
            return
        text = self.format(record)
        if text and text != "None":
            style = ("red" if record.levelno >= logging.ERROR
                     else "yellow" if record.levelno >= logging.WARNING else "")
            self._write(self.err, lambda: self.err.print(
                Text(printable(text), style=self._style(style))))

    def _track(self, record: logging.LogRecord, event) -> list[dict]:
        p, get = self.progress, record.__dict__.get
        if event == LogEvent.WORKFLOW_STARTED:
            # Where the workflow runs: Snakemake is in that directory from the Snakefile's
            # `workdir:` (a suite in runs/<name>/, planning/suite_dir.py) or --directory
            # until the run ends, and its outputs are relative to it; the report files are
            # named from where the command was typed (self.typed_in).
            self.started = True
            p.started(os.getcwd(), self.typed_in)
        elif event == LogEvent.RUN_INFO:
            p.plan(get("stats") or {})
        elif event == LogEvent.JOB_INFO:
            p.job_info(get("jobid"), get("rule_name"), get("output") or [], get("log") or [],
                       dict(get("resources") or {}))
        elif event == LogEvent.JOB_FINISHED:
            return p.job_finished(get("job_id"))
        elif event == LogEvent.PROGRESS:
            return p.progress(get("done"), get("total"))
        elif event == LogEvent.JOB_ERROR:
            p.job_error(get("jobid"), get("rule_name"), get("log") or [])
        return []

    def _print(self, event: dict) -> None:
        if self.mode == "json":
            def line() -> None:
                # json.dumps escapes control characters (\u001b): one valid line per event.
                self.out.file.write(json.dumps(event) + "\n")
                self.out.file.flush()

            self._write(self.out, line)
        elif event["event"] == "summary":
            for line in summary_lines(event):
                style = self._style("bold" if line.startswith("──") else "")
                self._write(self.out, lambda line=line, style=style: self.out.print(
                    Text(printable(line), style=style)))
        elif self.mode == "text":
            text = {"case": case_text, "ab": ab_text, "eta": eta_text}[event["event"]](event)
            style = STYLES.get(event.get("status"), "dim" if event["event"] == "eta" else "")
            self._write(self.out, lambda: self.out.print(
                Text(printable(text), style=self._style(style))))

    def _write(self, console: Console, write) -> None:
        """Calls `write` (a print to `console`) unless its stream has ended. On the first
        EPIPE (the reader went away) or other write error (a full disk) its descriptor is
        pointed at /dev/null, as Python's documentation on SIGPIPE advises, so that
        nothing more (our lines, the interpreter's flush at exit) fails writing there,
        and the run goes on to its end; a write error is said once on stderr."""
        fd = _descriptor(console.file)
        if fd in self.gone:
            return
        try:
            write()
        except BrokenPipeError:
            self._end_stream(fd)
        except OSError as exc:
            self._end_stream(fd)
            self._say_lost(fd, exc)

    def _end_stream(self, fd: int | None) -> None:
        if fd is not None:
            self.gone.add(fd)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)

    def _say_lost(self, fd: int | None, exc: OSError) -> None:
        """One line on stderr (unless stderr is what failed) for output that could not be
        written, and the run's exit status 1 (close)."""
        first, self.lost = not self.lost, True
        if not first or fd == 2 or 2 in self.gone:
            return
        name = {1: "stdout", 2: "stderr"}.get(fd, "its stream")
        try:
            os.write(2, printable(
                f"benchflow: cannot write the progress to {name} ({exc.strerror or exc}): "
                "nothing more is printed there; the run goes on, and exits "
                f"{OUTPUT_LOST}\n").encode())
        except OSError:
            pass

    def close(self) -> None:
        # Once: Snakemake closes its handlers when the run ends, logging again at exit.
        if self.closed:
            super().close()
            return
        self.closed = True
        if self.previous_sigint is not None \
                and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self.previous_sigint)
            signal.signal(signal.SIGTERM, self.previous_sigterm)
        if self.started and not self.common_settings.dryrun:
            if self.interrupted:
                self.progress.interrupt()
            for event in self.progress.unjudged():
                self._print(event)
            success = not self.errors and not self.progress.failed and not self.interrupted
            self._print(self.progress.summary(success))
        super().close()
        self._exit()

    def _exit(self) -> None:
        """Ends Snakemake's command line with the status the run's end calls for, where
        its own (0 or 1) would hide it: 130 after Ctrl-C, 1 when our output was lost.
        Snakemake closes its loggers last (LoggerManager.stop, from the API's __exit__ in
        the main thread) and catches Exception there, not SystemExit, so this is its
        exit status; what it skips of the API's cleanup, the interpreter's exit does
        (logging.shutdown flushes the log file, the temporary directory's finalizer)."""
        status = (128 + self.signum if self.interrupted else OUTPUT_LOST if self.lost
                  else None)
        if status is not None and self.exits \
                and threading.current_thread() is threading.main_thread():
            raise SystemExit(status)

    @property
    def writes_to_stream(self) -> bool:
        return True  # replaces Snakemake's default stream handler (text mode keeps its lines)

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True  # Snakemake's default filter, applied to its own messages only

    @property
    def has_formatter(self) -> bool:
        return False  # Snakemake's default formatter writes its own messages

    @property
    def needs_rulegraph(self) -> bool:
        return False


def _term_as_interrupt(heard) -> None:
    """SIGTERM as Ctrl-C. Snakemake's scheduler sets its own SIGTERM handler when it
    starts, after the loggers (and records reach us from a queue's thread, where no
    handler can be set): its `exit_gracefully`, which lets the running jobs finish
    (minutes), while their own SIGTERM, when a CI runner signals the whole group, fails
    them. Its handler is made ours, `heard`, which stops the jobs at once as on Ctrl-C.
    Where a Snakemake without that method is installed, its own answer stays."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return
    if hasattr(JobScheduler, "exit_gracefully"):
        JobScheduler.exit_gracefully = lambda scheduler, signum=signal.SIGTERM, frame=None: \
            heard(signal.SIGTERM, frame)


def _descriptor(stream) -> int | None:
    """The file descriptor under a stream; None for one without (a StringIO in tests)."""
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None
