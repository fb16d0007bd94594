"""CNTK's cntk.tests.test_utils, which seed scripts call."""


def set_device_from_pytest_env():
    """Nothing to choose: Loom computes on the CPU."""
