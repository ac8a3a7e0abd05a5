"""The job process's patch of torch's rendezvous event names (rlhf_exp/job/launch.py)."""

import inspect

from torch.distributed.elastic.rendezvous import dynamic_rendezvous

import rlhf_exp.job.launch  # noqa: F401 - installs the patch


def test_rendezvous_events_are_still_named_by_the_method_that_records_them():
    def _record() -> tuple[str, str]:  # as the handlers' _record calls it: the name is its caller's
        return dynamic_rendezvous.get_method_name(), inspect.stack()[1].function

    def next_rendezvous() -> tuple[str, str]:
        return _record()

    patched, torchs_own = next_rendezvous()
    assert patched == torchs_own == "next_rendezvous"
    assert dynamic_rendezvous.get_method_name(10_000) == "no_method_name"
