"""The cluster spec and the errors for devices it cannot hold (no Ray needed)."""

from __future__ import annotations

import pytest

from opsdk.dist.cluster import ClusterSpec, task_of
from opsdk.dist.engine import check_answers
from opsdk.registry.errors import OpsdkError


def test_counts_and_address_lists_name_the_same_tasks():
    a = ClusterSpec({"ps": 1, "worker": 2})
    b = ClusterSpec({"ps": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]})
    assert a.task_names() == b.task_names() == [
        "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    assert b.as_dict()["worker"] == ["h1:2222", "h2:2222"]


@pytest.mark.parametrize("jobs, message", [
    ({}, "expected a dict"),
    ({"ps": 0}, "at least one task"),
    ({"ps": "x"}, "task count or a list"),
    ({"1ps": 1}, "must be a word"),
])
def test_bad_specs_say_what_was_expected(jobs, message):
    with pytest.raises(OpsdkError, match=message):
        ClusterSpec(jobs)


def test_a_device_naming_a_missing_job_or_task_is_an_error_naming_the_node():
    cluster = ClusterSpec({"ps": 1, "worker": 2})
    assert cluster.check_location("/job:worker/task:1/cpu:0") == "/job:worker/replica:0/task:1"
    with pytest.raises(OpsdkError, match="node 'w': device '/job:chief/task:0' names job 'chief', "
                                         "which the cluster lacks \\(jobs: ps, worker\\)"):
        cluster.check_location("/job:chief/task:0", "w")
    with pytest.raises(OpsdkError, match="names task 2 of job 'worker', which has 2 task"):
        cluster.check_location("/job:worker/task:2")


def test_task_of_a_location():
    assert task_of("/job:ps/replica:0/task:1/device:CPU:0") == "/job:ps/replica:0/task:1"


def test_an_address_that_does_not_answer_is_a_clear_error():
    with pytest.raises(OpsdkError, match="127.0.0.1:1 does not answer .*ray start --head"):
        check_answers("127.0.0.1:1")
    with pytest.raises(OpsdkError, match="expected host:port"):
        check_answers("nowhere")
