"""Structured logs: JSON lines in a cluster (or when asked), plain text on a terminal."""

from __future__ import annotations

import json
import logging
import sys
import time

from gitsync.errors import printable

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # structured fields passed through extra= (key, identity, informer...)
        out |= {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """One line per record (a traceback aside): messages and fields hold names and
    values from Git and the cluster, so their control characters are escaped and a
    newline in a file name cannot forge a log line. (JSON lines escape by encoding.)"""

    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        message = printable(record.getMessage())
        base = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {message}"
        if extra:
            base += " " + " ".join(f"{k}={printable(str(v))}" for k, v in extra.items())
        if record.exc_info:
            base += "\n" + self.formatException(record.exc_info)
        return base


def setup(fmt: str = "auto", level: str = "info") -> None:
    """``auto``: text on a terminal, JSON otherwise (in a Pod)."""
    if fmt == "auto":
        fmt = "text" if sys.stderr.isatty() else "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # the libraries' own chatter is not ours to show at info
    # (APScheduler's one warning of ours, "skipped: maximum number of running instances
    # reached (2)", is a sync request that a pass already waiting covers: Daemon.schedule)
    for noisy in ("urllib3", "kubernetes", "git", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
