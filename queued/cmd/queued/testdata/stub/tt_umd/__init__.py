"""A stand-in for tt_umd's Python module, for testing health_check.py.

It mimics the names health_check.py uses (TTDevice.create, init_tt_device,
get_firmware_info_provider, get_arc_telemetry_reader, TelemetryTag.AICLK)
and behaves as the comma-separated modes in TT_STUB_UMD say: ok,
create_fail, init_fail, telemetry_fail, zero, reader_only (no firmware
info provider; the raw telemetry packs the maximum clock into the upper 16
bits). Each call is appended to the file TT_STUB_UMD_LOG.
"""

import enum
import os

MODES = set(os.environ.get("TT_STUB_UMD", "ok").split(","))


def _log(line):
    with open(os.environ["TT_STUB_UMD_LOG"], "a") as f:
        f.write(line + "\n")


class TelemetryTag(enum.IntEnum):
    AICLK = 14
    AXICLK = 15
    ARCCLK = 16


class _Reader:
    def is_entry_available(self, tag):
        return True

    def read_entry(self, tag):
        _log(f"read_entry {tag}")
        if "telemetry_fail" in MODES:
            raise RuntimeError("telemetry table address is 0")
        if "zero" in MODES:
            return 0
        return (1350 << 16) | 1000


class _Provider:
    def get_aiclk(self):
        _log("get_aiclk")
        if "telemetry_fail" in MODES:
            raise RuntimeError("ARC did not answer")
        return 0 if "zero" in MODES else 1000

    def get_arcclk(self):
        return 540

    def get_axiclk(self):
        return None


class TTDevice:
    def __init__(self, number):
        self.number = number

    @staticmethod
    def create(device_number):
        _log(f"create {device_number}")
        if "create_fail" in MODES:
            raise RuntimeError(f"failed to open /dev/tenstorrent/{device_number}")
        return _ReaderOnly(device_number) if "reader_only" in MODES else TTDevice(device_number)

    def init_tt_device(self):
        _log("init_tt_device")
        if "init_fail" in MODES:
            raise RuntimeError("timed out waiting for ARC to start")

    def get_firmware_info_provider(self):
        return _Provider()

    def get_arc_telemetry_reader(self):
        return _Reader()


class _ReaderOnly(TTDevice):
    """A device of an older tt_umd, without a firmware info provider."""

    get_firmware_info_provider = None


class PCIDevice:
    @staticmethod
    def enumerate_devices(*args):
        _log("enumerate_devices")  # an all-card scan; the check must not call it
        return [0, 1]
