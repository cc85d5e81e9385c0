"""Which errors a disk raised, read the same way everywhere: the sentence a command ends with, the
run that stops resumable, and the failed trial that is not recorded but runs again on `--resume`
because the machine, not the trial, failed."""

from __future__ import annotations

import errno

import pytest

from planner._core.errors import DiskError, disk_error, disk_failed
from planner._store.resume import failed_for_the_disk
from planner._trial.protocol import run_trial
from tests._trial_specs import spec

# every errno planner reads as a disk's refusal: (a sentence, the run stops resumable, a trial
# that met it in its trainable runs again)
REFUSALS = {
    errno.ENOSPC: (True, True, True),
    errno.EDQUOT: (True, True, True),
    errno.EIO: (True, True, True),
    errno.EROFS: (True, True, False),
    errno.EACCES: (True, False, False),
    errno.EPERM: (True, False, False),
    errno.ENOENT: (False, False, False),
    errno.ENOTDIR: (False, False, False),
}


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_an_oserror_is_a_sentence_and_stops_the_run_by_its_errno(code):
    said, stops, _ = REFUSALS[code]
    error = OSError(code, "the machine's words", "/runs/x/trials.jsonl")
    sentence = disk_error(error, "/runs")
    assert isinstance(sentence, DiskError) if said else sentence is None
    if said:
        assert str(sentence).startswith(("cannot write /runs/x/trials.jsonl: ", "cannot use "))
    assert disk_failed(error) is stops


def test_an_error_that_is_not_an_oserror_is_never_a_disks():
    assert not disk_failed(ValueError(f"[Errno {errno.ENOSPC}] No space left on device"))
    assert not disk_failed(KeyboardInterrupt())


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_a_trial_failed_by_an_oserror_runs_again_only_when_the_disk_failed(tmp_path, code):
    reruns = REFUSALS[code][2]
    record = run_trial(spec("os_error", tmp_path, config={"errno": code}))
    assert record["status"] == "failed" and record["errors"][-1]["errno"] == code
    said = failed_for_the_disk(record)
    assert (said is not None) is reruns
    if reruns:
        assert said.startswith("OSError: ")


def test_an_errno_quoted_in_a_message_is_the_trials_own_failure(tmp_path):
    record = run_trial(spec("os_error", tmp_path, config={"errno": errno.ENOSPC, "quoted": True}))
    assert record["status"] == "failed" and "[Errno 28]" in record["errors"][-1]["message"]
    assert "errno" not in record["errors"][-1] and failed_for_the_disk(record) is None


def test_a_completed_trial_whose_earlier_attempt_met_a_full_disk_is_its_result(tmp_path):
    record = run_trial(spec("good", tmp_path))
    record["errors"] = [{"attempt": 1, "type": "OSError", "message": "", "errno": errno.ENOSPC}]
    assert failed_for_the_disk(record) is None
