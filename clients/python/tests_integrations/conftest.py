import os
import signal
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from harness import Approver, Server  # noqa: E402


@pytest.fixture
def server():
    s = Server()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def approver(server):
    return Approver(server)


class Background:
    """Runs a function in a thread (the agent, blocked on a person) and returns its
    result or raises its error on ``result()``."""

    def __init__(self, func, *args, **kwargs):
        self.value = self.error = None
        self.thread = threading.Thread(target=self._run, args=(func, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, func, args, kwargs):
        try:
            self.value = func(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def result(self, timeout=120):
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"the agent did not finish in {timeout} s")
        if self.error is not None:
            raise self.error
        return self.value


@pytest.fixture
def background():
    return Background


PROGRAMS = os.path.join(HERE, "programs")


class Programs:
    """Runs a test agent as a child process, as a real deployment would."""

    def __init__(self, server, tmp_path):
        self.server, self.tmp = server, tmp_path

    def env(self, **extra):
        env = dict(os.environ, **self.server.env_for_agent(), **extra)
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), PROGRAMS, env.get("PYTHONPATH", "")])
        return env

    def run_and_kill(self, program, args, during=None, timeout=90):
        """Starts the agent, runs ``during()`` (the approver's part), waits until the
        agent says it reached the moment to die, and kills it with SIGKILL."""
        import subprocess
        import time

        marker = str(self.tmp / f"kill-{program}")
        # A session of its own, so the kill takes the agent's own children too (the
        # Claude Code CLI).
        child = subprocess.Popen([sys.executable, os.path.join(PROGRAMS, program)] + list(args),
                                 env=self.env(FD_TEST_MARKER=marker), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if during is not None:
                during()
            deadline = time.monotonic() + timeout
            while not os.path.exists(marker):
                if child.poll() is not None:
                    raise AssertionError(f"{program} exited before the kill:\n{child.stdout.read().decode()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"{program} never reached the kill point")
                time.sleep(0.05)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
            assert child.returncode == -signal.SIGKILL
            return child.stdout.read().decode()
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()

    def run(self, program, args, timeout=120):
        import subprocess

        done = subprocess.run([sys.executable, os.path.join(PROGRAMS, program)] + list(args), env=self.env(),
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{program} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture
def programs(server, tmp_path):
    return Programs(server, tmp_path)
