"""pytest hooks that make a missing compiled extension a FAILURE, never a quiet skip.

Contract: ``install(namespace, env_var, what, probe)`` adds hooks to a conftest's namespace.
When ``os.environ[env_var] == "1"`` (meson sets it for a build that enabled torch or tf) and
``probe()`` returns an error string (the extension does not import), then
  * every skip in the session (module-level ``pytest.skip``, ``skipif`` marks, fixture skips)
    is turned into a failure that names the import error and the original skip reason;
  * the session's exit status is forced to 1 even when nothing was collected or skipped;
  * the terminal summary ends with one line saying why.
When the variable is unset or the extension imports, skips stay skips (e.g. torchvision absent).
"""
from __future__ import annotations

import os

import pytest


def _skip_reason(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def install(namespace: dict, env_var: str, what: str, probe) -> None:
    state: dict = {}

    def missing():
        """The import error when the extension is expected and absent, else None (cached)."""
        if "error" not in state:
            state["error"] = probe() if os.environ.get(env_var) == "1" else None
        return state["error"]

    def message(original: str = "") -> str:
        text = (f"this build enabled the extension ({env_var}=1) but {what} does not import: "
                f"{missing()}. A skip here would hide a broken build; fix the build (or run "
                f"without {env_var}=1 outside meson).")
        return text + (f" Original skip reason: {original}" if original else "")

    def convert(report):
        if report.skipped and missing() and not hasattr(report, "wasxfail"):
            report.outcome = "failed"
            report.longrepr = message(_skip_reason(report.longrepr))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(collector):  # module-level pytest.skip
        outcome = yield
        convert(outcome.get_result())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):  # skipif marks, skips in fixtures or tests
        outcome = yield
        convert(outcome.get_result())

    def pytest_sessionfinish(session, exitstatus):
        if missing() and session.exitstatus == 0:
            session.exitstatus = 1
        if missing() and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = 1

    def pytest_terminal_summary(terminalreporter):
        if missing():
            terminalreporter.write_line(f"FAILED (not skipped): {message()}", red=True)

    namespace.update(pytest_make_collect_report=pytest_make_collect_report,
                     pytest_runtest_makereport=pytest_runtest_makereport,
                     pytest_sessionfinish=pytest_sessionfinish,
                     pytest_terminal_summary=pytest_terminal_summary)


def probe_torch() -> str | None:
    """None when tictac.torch._C imports, else the reason."""
    try:
        import tictac.torch
    except ImportError as exc:
        return f"import tictac.torch failed: {exc}"
    if not tictac.torch.available():
        return str(tictac.torch._C_ERROR)
    return None


def probe_tf() -> str | None:
    """None when tictac.tf (its op library) imports, else the reason."""
    try:
        import tictac.tf  # noqa: F401
    except Exception as exc:  # ImportError, or tf's NotFoundError from load_op_library
        return f"import tictac.tf failed: {type(exc).__name__}: {exc}"
    return None
