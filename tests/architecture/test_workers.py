"""`make test`'s two workers: each test file runs whole on one worker, and so does all of
tests/stack/ (each synthesized app built once), the longest units handed out first.

GIVEN the scheduler tests/conftest.py gives pytest-xdist for `--dist loadgroup`, two
workers and a collection with several files (one of them parametrized) and tests/stack/,
WHEN the tests are handed out,
THEN no file's tests and no tests/stack/ test land on two workers, and the first units
handed out are the longest ones.
"""

from __future__ import annotations

from types import SimpleNamespace

from tests import conftest

COLLECTION = [
    "tests/actuators/test_asg.py::test_a",
    "tests/actuators/test_asg.py::test_b[one]",
    "tests/actuators/test_asg.py::test_b[two]",
    "tests/cli/test_cli_output.py::test_c",
    "tests/cli/test_cli_output.py::test_d",
    "tests/demo/test_demo.py::test_e",
    "tests/demo/test_demo.py::test_f",
    "tests/stack/test_construct.py::test_g",
    "tests/stack/test_org.py::test_h",
    "tests/stack/test_org.py::test_i",
    "tests/settings/test_defaults.py::test_j",
]


class Worker:
    def __init__(self, name: str):
        self.name, self.sent, self.gateway, self.shutting_down = name, [], SimpleNamespace(id=name), False
        self.done = 0

    def send_runtest_some(self, indices):
        self.sent.extend(COLLECTION[i] for i in indices)

    def send_runtest_all(self):
        self.sent.extend(COLLECTION)

    def shutdown(self):
        self.shutting_down = True


def test_files_and_tests_stack_run_whole_on_one_worker_longest_first():
    config = SimpleNamespace(getvalue=lambda name: {"dist": "loadgroup", "tx": ["2*popen"]}.get(name),
                             option=SimpleNamespace(loadscopereorder=True, maxschedchunk=None))
    scheduler = conftest.pytest_xdist_make_scheduler(config, None)
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, COLLECTION)
    scheduler.schedule()
    # each worker runs what it was sent, one test at a time, taking more as it goes
    while any(w.done < len(w.sent) for w in workers):
        for worker in workers:
            if worker.done < len(worker.sent):
                scheduler.mark_test_complete(worker, COLLECTION.index(worker.sent[worker.done]))
                worker.done += 1

    on = {}
    for worker in workers:
        for nodeid in worker.sent:
            on.setdefault(conftest.work_unit(nodeid), set()).add(worker.name)
    assert set(on) == {"tests/actuators/test_asg.py", "tests/cli/test_cli_output.py", "tests/demo/test_demo.py",
                       conftest.SYNTH_DIR, "tests/settings/test_defaults.py"}
    assert all(len(names) == 1 for names in on.values()), on
    assert sorted(sum((w.sent for w in workers), [])) == sorted(COLLECTION)
    # the first unit each worker got: the two longest of LONGEST_FIRST present here
    firsts = {conftest.work_unit(w.sent[0]) for w in workers}
    assert firsts == {"tests/demo/test_demo.py", conftest.SYNTH_DIR}, firsts


def test_without_loadgroup_xdist_schedules_as_asked():
    config = SimpleNamespace(getvalue=lambda name: {"dist": "load"}.get(name))
    assert conftest.pytest_xdist_make_scheduler(config, None) is None
