"""workflow/backends/packages.py without the network: which releases lie between two
versions (real version lists of the index), the constraints an install uses, and the
cached environments' reuse, redo, locking and failures (the venv and pip steps
replaced by a fake that lays out what they would; the real install is
tests/test_bisect_packages.py's).

CASES is also a source of the docs' table of malformed inputs and their messages:
(id, description, package, good, bad, a fragment of the expected one-line message).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from workflow.backends import packages
from workflow.backends.packages import between, constraints_without, environment, releases
from workflow.errors import ConfigError

# `pip index versions NAME --pre --json` against PyPI (with this machine's find-links,
# which add torch's 2.13.0+cpu wheel), newest first as pip gives them.
IREE_COMPILER = ["3.13.0", "3.12.0", "3.11.0", "3.10.0", "3.9.0", "3.8.0", "3.7.1", "3.7.0",
                 "3.6.0", "3.5.0", "3.4.0", "3.3.0", "3.2.0", "3.1.0", "3.0.0", "2.9.0"]
TORCH = ["2.15.0", "2.14.1", "2.14.0", "2.13.0+cpu", "2.13.0", "2.12.1", "2.12.0", "2.11.0",
         "2.10.0", "2.9.1", "2.9.0", "2.8.0", "2.7.1", "2.7.0", "2.6.0", "2.5.1", "2.5.0",
         "2.4.1", "2.4.0", "2.3.1", "2.3.0", "2.2.2", "2.2.1", "2.2.0", "2.1.2", "2.1.1",
         "2.1.0", "2.0.1", "2.0.0", "1.13.1", "1.13.0"]
TORCHAO = ["0.18.0", "0.17.0", "0.16.0", "0.15.0", "0.14.1", "0.14.0", "0.13.0", "0.12.0",
           "0.11.0", "0.10.0", "0.9.0", "0.8.0", "0.7.0", "0.6.1", "0.5.0", "0.4.0", "0.3.1",
           "0.3.0", "0.2.0", "0.1", "0.0.3", "0.0.1"]
# The forms other indexes add: IREE's nightly links (rc + date), PyTorch's own index
# (test candidates, nightlies, CPU and CUDA builds), a post-release, a name pip lists
# but PEP 440 does not parse.
MIXED = ["3.4.0", "3.5.0rc20250512", "3.5.0rc20250601", "3.5.0", "3.5.0.post1",
         "3.6.0.dev20250701", "3.6.0rc1", "3.6.0", "3.6.0+cpu", "3.6.0+cu126", "3.7.0+cpu",
         "3.7.0", "not-a-version"]


@pytest.mark.parametrize(("available", "good", "bad", "expected"), [
    (IREE_COMPILER, "3.10.0", "3.13.0", ["3.10.0", "3.11.0", "3.12.0", "3.13.0"]),
    (IREE_COMPILER, "3.7.0", "3.8.0", ["3.7.0", "3.7.1", "3.8.0"]),
    (IREE_COMPILER, "3.12", "3.13", ["3.12.0", "3.13.0"]),  # the index's spelling back
    (TORCH, "2.12.0", "2.14.0", ["2.12.0", "2.12.1", "2.13.0", "2.14.0"]),
    (TORCHAO, "0.0.3", "0.2.0", ["0.0.3", "0.1", "0.2.0"]),
    (MIXED, "3.4.0", "3.6.0", ["3.4.0", "3.5.0", "3.5.0.post1", "3.6.0"]),
    (MIXED, "3.5.0rc20250512", "3.5.0", ["3.5.0rc20250512", "3.5.0rc20250601", "3.5.0"]),
    (MIXED, "3.5.0", "3.6.0.dev20250701", ["3.5.0", "3.5.0.post1", "3.6.0.dev20250701"]),
    (MIXED, "3.5.0.post1", "3.6.0rc1", ["3.5.0.post1", "3.6.0.dev20250701", "3.6.0rc1"]),
    (MIXED, "3.6.0+cpu", "3.7.0+cpu", ["3.6.0+cpu", "3.7.0+cpu"]),
], ids=["iree-3.10-3.13", "iree-post-patch", "short-spelling", "torch-skips-local",
        "torchao-0.1", "finals-and-post", "rc-end", "dev-end", "post-to-rc", "cpu-builds"])
def test_between_picks_the_releases_in_order(available, good, bad, expected):
    assert between(available, "pkg", good, bad) == expected


CASES = [
    ("pkg-unknown", "a package benchflow does not bisect", "numpy", "1.0", "2.0",
     "--package 'numpy': not a package benchflow bisects; expected one of iree-base-compiler"),
    ("pkg-not-version", "a good end that is no PEP 440 version", "iree-base-compiler",
     "3.x", "3.13.0", "iree-base-compiler good '3.x': not a version; expected a release"),
    ("pkg-not-released", "a bad end between two releases", "iree-base-compiler", "3.10.0",
     "3.10.1", "iree-base-compiler bad 3.10.1: not a release on the package index; "
     "nearest: 3.10.0 and 3.11.0"),
    ("pkg-too-new", "a bad end past the newest release", "iree-base-compiler", "3.10.0",
     "4.0.0", "not a release on the package index; the newest is 3.13.0"),
    ("pkg-too-old", "a good end before the oldest release", "iree-base-compiler", "1.0",
     "3.10.0", "not a release on the package index; the oldest is 2.9.0"),
    ("pkg-same-ends", "good and bad the same release", "iree-base-compiler", "3.11.0",
     "3.11", "good 3.11.0 is not older than bad 3.11; expected the older release as good"),
    ("pkg-reversed", "good newer than bad", "iree-base-compiler", "3.13.0", "3.10.0",
     "good 3.13.0 is not older than bad 3.10.0"),
    ("pkg-two-builds", "a CPU build against a plain release", "torch", "2.13.0+cpu",
     "2.14.0", "good 2.13.0+cpu and bad 2.14.0 are different builds"),
]


@pytest.mark.parametrize(("case_id", "description", "package", "good", "bad", "expected"),
                         CASES, ids=[c[0] for c in CASES])
def test_bad_ends_are_one_line_errors(monkeypatch, case_id, description, package, good, bad,
                                      expected):
    lists = {"iree-base-compiler": IREE_COMPILER, "torch": TORCH}
    monkeypatch.setattr(packages, "index_versions", lambda name: lists[name])
    with pytest.raises(ConfigError) as err:
        releases(package, good, bad)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_package_and_bad_versions_never_ask_the_index(monkeypatch):
    def asked(name):
        raise AssertionError("the index was asked")
    monkeypatch.setattr(packages, "index_versions", asked)
    for args in (("numpy", "1.0", "2.0"), ("torch", "2.x", "2.5.0"), ("torch", "2.4", "")):
        with pytest.raises(ConfigError):
            releases(*args)


def test_constraints_drop_only_the_packages_own_pin(repo):
    text = (repo / "constraints.txt").read_text()
    kept = constraints_without("iree-base-compiler", text)
    assert "iree-base-compiler==" not in kept
    assert "iree-base-runtime==" in kept and "torch==" in kept
    kept = constraints_without("torch", text)
    assert "\ntorch==" not in "\n" + kept and "torchao==" in kept
    assert "# torch must stay pinned" in kept  # comments stay
    odd = "TorchAO >= 0.1 ; python_version > '3'\n-c other.txt\ntorch==2.0\n"
    assert constraints_without("torchao", odd) == "-c other.txt\ntorch==2.0\n"
    assert constraints_without("Iree_Base.Compiler", "iree-base-compiler==3.13\n") == "\n"


def site_dir(prefix: Path) -> Path:
    return prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


class FakeTools:
    """What `python -m venv` and `pip install` leave (a venv's layout, the package's
    console scripts), and the argument lists they were given; `fail` makes pip fail."""

    def __init__(self, fail: str = "", delay: float = 0.0):
        self.calls: list[list[str]] = []
        self.fail, self.delay = fail, delay
        self.missing: set[str] = set()  # console scripts a broken wheel left out

    def __call__(self, argv, *, timeout, env=None):
        argv = [str(a) for a in argv]
        if argv[3:5] == ["config", "list"]:  # the index the waiting line names
            return CompletedProcess(argv, 0, "global.index-url='https://pypi.example/s'\n", "")
        self.calls.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            prefix = Path(argv[-1])
            (prefix / "bin").mkdir(parents=True)
            site_dir(prefix).mkdir(parents=True)
            (prefix / "bin" / "python").write_text("")
            (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
            return CompletedProcess(argv, 0, "", "")
        time.sleep(self.delay)
        if self.fail:
            return CompletedProcess(argv, 1, "", f"Looking in links\nERROR: {self.fail}\n")
        bin_dir = Path(argv[argv.index("--python") + 1]).parent
        made = {"iree-compile", "iree-opt", "iree-benchmark-module", "iree-run-module"}
        for name in made - self.missing:
            (bin_dir / name).write_text("")
        return CompletedProcess(argv, 0, "Successfully installed\n", "")


@pytest.fixture
def fake(monkeypatch):
    tools = FakeTools()
    monkeypatch.setattr(packages, "capture", tools)
    return tools


def test_an_environment_is_installed_once_and_reused(tmp_path, fake):
    env = environment("iree-base-compiler", "3.10.0", tmp_path / "envs")
    assert env.prefix == (tmp_path / "envs" / "iree-base-compiler-3.10.0").absolute()
    assert env.python == env.prefix / "bin" / "python"
    # The compiler's release is timed with its own runtime (packages.COMPANIONS).
    assert env.tools == {name: env.prefix / "bin" / name for name in
                         ("iree-compile", "iree-benchmark-module", "iree-run-module")}
    venv, pip = fake.calls
    assert "--copies" in venv and "--without-pip" in venv
    assert pip[:3] == [sys.executable, "-m", "pip"]
    assert "iree-base-compiler==3.10.0" in pip and "iree-base-runtime==3.10.0" in pip
    assert pip[pip.index("--only-binary") + 1] == "iree-base-compiler,iree-base-runtime"
    pins = Path(pip[pip.index("-c") + 1]).read_text()
    assert "iree-base-compiler==" not in pins and "iree-base-runtime==" not in pins
    assert "numpy==" in pins
    layer = site_dir(env.prefix) / packages.LAYER_PTH
    assert f"site.addsitedir({packages.sysconfig.get_paths()['purelib']!r})" \
        in layer.read_text()
    assert json.loads((env.prefix / packages.MARKER).read_text())["version"] == "3.10.0"
    assert environment("iree-base-compiler", "3.10.0", tmp_path / "envs") == env
    assert len(fake.calls) == 2  # reused: no venv, no pip


def test_an_interrupted_install_is_redone(tmp_path, fake):
    prefix = tmp_path / "iree-base-compiler-3.11.0"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("")
    (prefix / "bin" / "iree-compile").write_text("half written")
    env = environment("iree-base-compiler", "3.11.0", tmp_path)
    assert (env.prefix / "bin" / "iree-compile").read_text() == ""  # pip's, not the stale one
    assert len(fake.calls) == 2


def test_a_lost_tool_or_another_version_in_the_marker_is_no_finished_install(tmp_path, fake):
    env = environment("iree-base-compiler", "3.11.0", tmp_path)
    env.tools["iree-compile"].unlink()
    environment("iree-base-compiler", "3.11.0", tmp_path)
    marker = json.loads((env.prefix / packages.MARKER).read_text())
    for key, other in (("version", "3.12.0"), ("python", "3.10.4")):
        (env.prefix / packages.MARKER).write_text(json.dumps({**marker, key: other}))
        environment("iree-base-compiler", "3.11.0", tmp_path)
    assert len(fake.calls) == 8


def test_a_layer_over_another_checkout_is_relaid_without_a_reinstall(tmp_path, fake):
    env = environment("iree-base-compiler", "3.11.0", tmp_path)
    layer = site_dir(env.prefix) / packages.LAYER_PTH
    ours = layer.read_text()
    layer.write_text("import site; site.addsitedir('/elsewhere/.venv/lib')\n")
    assert environment("iree-base-compiler", "3.11.0", tmp_path) == env
    assert layer.read_text() == ours and len(fake.calls) == 2


def test_a_failed_install_names_the_release_and_pips_last_line(tmp_path, fake):
    fake.fail = "No matching distribution found for iree-base-compiler==2.0.0"
    with pytest.raises(ConfigError) as err:
        environment("iree-base-compiler", "2.0.0", tmp_path)
    message = str(err.value)
    assert message.startswith("iree-base-compiler==2.0.0: pip install failed: ERROR: No "
                              "matching distribution found for iree-base-compiler==2.0.0")
    assert "install.log" in message and "\n" not in message
    assert not (tmp_path / "iree-base-compiler-2.0.0" / packages.MARKER).exists()
    fake.fail = ""
    assert environment("iree-base-compiler", "2.0.0", tmp_path).tools  # tried again


def test_a_release_without_its_tools_is_refused(tmp_path, fake):
    fake.missing = {"iree-benchmark-module", "iree-run-module"}
    with pytest.raises(ConfigError, match=r"iree-base-runtime==3\.10\.0: installed no "
                                          r"iree-benchmark-module, iree-run-module"):
        environment("iree-base-runtime", "3.10.0", tmp_path)


def test_torch_packages_have_no_tools_and_keep_their_pin_only(tmp_path, fake):
    env = environment("torchao", "0.17.0", tmp_path)
    assert env.tools == {}
    pins = Path(fake.calls[1][fake.calls[1].index("-c") + 1]).read_text()
    assert "torchao==" not in pins and "torch==" in pins


def test_two_bisections_sharing_a_cache_install_once(tmp_path, fake):
    fake.delay = 0.3
    got, start = [], threading.Barrier(2)

    def bisection():
        start.wait()
        got.append(environment("iree-base-compiler", "3.12.0", tmp_path))

    threads = [threading.Thread(target=bisection) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] == got[1]
    assert len(fake.calls) == 2


@pytest.mark.parametrize(("package", "version", "make", "expected"), [
    ("iree-base-compiler", "../../etc", None, "not a version"),
    ("numpy", "1.0", None, "not a package benchflow bisects"),
    ("iree-base-compiler", "3.10.0", "dir", "exists and is not a package environment"),
    ("iree-base-compiler", "3.10.0", "cache-file", "expected a directory for package"),
], ids=["path-in-version", "unknown", "foreign-directory", "cache-is-a-file"])
def test_environment_refuses_in_one_line(tmp_path, fake, package, version, make, expected):
    cache = tmp_path / "envs"
    if make == "dir":
        (cache / "iree-base-compiler-3.10.0").mkdir(parents=True)
        (cache / "iree-base-compiler-3.10.0" / "mine.txt").write_text("keep")
    elif make == "cache-file":
        cache.write_text("")
    with pytest.raises(ConfigError) as err:
        environment(package, version, cache)
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert fake.calls == []
    if make == "dir":
        assert (cache / "iree-base-compiler-3.10.0" / "mine.txt").read_text() == "keep"


@pytest.mark.parametrize(("rc", "stdout", "stderr", "expected"), [
    (0, json.dumps({"name": "torch", "versions": TORCH}), "WARNING: experimental\n", None),
    (1, "", "WARNING: experimental\nERROR: No matching distribution found for torch\n",
     "torch: the package index could not be read: pip says 'ERROR: No matching "
     "distribution found for torch'"),
    (2, "", "\nno such option: --json\n", "pip says 'no such option: --json'"),
    (0, "torch (2.15.0)\nAvailable versions: 2.15.0\n", "", "gave no version list"),
    (0, json.dumps({"versions": [2.15]}), "", "gave no version list"),
], ids=["answer", "not-found", "old-pip", "text-answer", "numbers"])
def test_the_index_answer_is_read_or_refused_in_one_line(monkeypatch, rc, stdout, stderr,
                                                         expected):
    asked = []

    def pip(argv, *, timeout, env=None):
        asked.append(argv)
        return CompletedProcess(argv, rc, stdout, stderr)

    monkeypatch.setattr(packages, "capture", pip)
    if expected is None:
        assert packages.index_versions("torch") == TORCH
        assert asked[-1][-5:] == ["index", "versions", "torch", "--pre", "--json"]
        return
    with pytest.raises(ConfigError) as err:
        packages.index_versions("torch")
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.tool
def test_the_waiting_line_names_no_index_when_pip_asks_none(monkeypatch, tmp_path):
    """PIP_NO_INDEX=1: pip asks only the find-links; the line said the default index."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    asked = packages.indexes()
    assert asked == f"no index (pip's no-index is set), only the find-links {tmp_path}"
    monkeypatch.setenv("PIP_NO_INDEX", "0")  # set, but off: the indexes as configured
    assert str(tmp_path) in packages.indexes() and "no index" not in packages.indexes()
