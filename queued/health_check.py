#!/usr/bin/env python3
"""Health check for one Tenstorrent card, run by queued after a reset.

Usage: health_check.py DEVICE

DEVICE is the physical card number, the N of /dev/tenstorrent/N (not a UMD
logical id). The check opens only that card through tt_umd, initializes
it, and reads its clock telemetry. It exits 0 and prints the clocks when
AICLK is above zero; otherwise it prints one line to stderr saying what
failed and exits with:

    2  bad argument
    3  tt_umd cannot be imported (run it with the Python that has tt_umd,
       by default ~/tenstorrent/.venv/bin/python3)
    4  the card's device node is missing or tt_umd cannot open it
    5  the card does not initialize
    6  its clock telemetry cannot be read
    7  AICLK reads 0: the AI clock is not running

tt-smi exits 0 even when a reset failed, so this check is the only proof
queued has that a reset worked. It deliberately avoids an all-card scan
(tt-smi -s, tt_umd.Cluster, PCIDevice.enumerate_devices): a card that
another queue is using must not be touched.

The tt_umd calls were checked against tt-umd's nanobind bindings
(nanobind/py_api_tt_device.cpp, nanobind/py_api_telemetry.cpp and
nanobind/tests/test_py_telemetry.py, 2025 sources): TTDevice.create(device_number),
TTDevice.init_tt_device(), TTDevice.get_firmware_info_provider() with
get_aiclk()/get_arcclk()/get_axiclk() returning an int or None, and
TTDevice.get_arc_telemetry_reader().read_entry(int(TelemetryTag.AICLK)).
They were not run against real hardware here, and older tt_umd releases
may lack some of them; the check then falls back as noted below and says
which call was missing.

TT_HEALTH_CHECK_DEV_DIR overrides where device nodes are looked for
(default /dev/tenstorrent).
"""

import os
import sys

EXIT_USAGE = 2
EXIT_NO_MODULE = 3
EXIT_NO_DEVICE = 4
EXIT_INIT = 5
EXIT_TELEMETRY = 6
EXIT_CLOCK_ZERO = 7


class CheckFailed(Exception):
    """A failed step: its message is printed and code is the exit status."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def parse_device(argv):
    if len(argv) != 2:
        raise CheckFailed(EXIT_USAGE, "usage: health_check.py DEVICE (the N of /dev/tenstorrent/N)")
    text = argv[1]
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        raise CheckFailed(EXIT_USAGE, f"device {text!r} is not a card number (the N of /dev/tenstorrent/N)")
    return int(text)


def describe(err):
    return f"{type(err).__name__}: {err}"


def open_card(tt_umd, device):
    node = os.path.join(os.environ.get("TT_HEALTH_CHECK_DEV_DIR", "/dev/tenstorrent"), str(device))
    if not os.path.exists(node):
        raise CheckFailed(EXIT_NO_DEVICE, f"card {device}: device node {node} does not exist")
    try:
        dev = tt_umd.TTDevice.create(device)
    except Exception as err:  # tt_umd raises RuntimeError for C++ exceptions
        raise CheckFailed(EXIT_NO_DEVICE, f"card {device}: tt_umd cannot open {node}: {describe(err)}")
    if dev is None:
        raise CheckFailed(EXIT_NO_DEVICE, f"card {device}: tt_umd returned no device for {node}")
    try:
        dev.init_tt_device()
    except Exception as err:
        raise CheckFailed(EXIT_INIT, f"card {device}: initialization failed: {describe(err)}")
    return dev


def read_clocks(tt_umd, dev, device):
    """Returns {name: MHz}, AICLK always among them."""
    clocks = {}
    # The firmware info provider knows which telemetry layout the card's
    # firmware uses, so it is asked first.
    get_provider = getattr(dev, "get_firmware_info_provider", None)
    if get_provider is not None:
        try:
            provider = get_provider()
            for name, getter in (("AICLK", "get_aiclk"), ("ARCCLK", "get_arcclk"), ("AXICLK", "get_axiclk")):
                read = getattr(provider, getter, None)
                value = read() if read is not None else None
                if value is not None:
                    clocks[name] = int(value)
        except Exception as err:
            raise CheckFailed(EXIT_TELEMETRY, f"card {device}: reading clock telemetry failed: {describe(err)}")
    if "AICLK" in clocks:
        return clocks
    # Older tt_umd, or a provider without AICLK: read the ARC telemetry
    # table directly.
    try:
        reader = dev.get_arc_telemetry_reader()
        tag = int(tt_umd.TelemetryTag.AICLK)
        available = getattr(reader, "is_entry_available", None)
        if available is not None and not available(tag):
            raise CheckFailed(EXIT_TELEMETRY, f"card {device}: its firmware reports no AICLK telemetry")
        # Some firmware packs the maximum clock into the upper 16 bits;
        # the current clock in MHz is the lower 16 either way.
        clocks["AICLK"] = int(reader.read_entry(tag)) & 0xFFFF
    except CheckFailed:
        raise
    except Exception as err:
        raise CheckFailed(EXIT_TELEMETRY, f"card {device}: reading AICLK telemetry failed: {describe(err)}")
    return clocks


def check(argv):
    device = parse_device(argv)
    try:
        import tt_umd
    except ImportError as err:
        raise CheckFailed(EXIT_NO_MODULE, f"cannot import tt_umd ({err}); run this with the Python that has it, "
                          f"such as ~/tenstorrent/.venv/bin/python3 (this is {sys.executable})")
    dev = open_card(tt_umd, device)
    clocks = read_clocks(tt_umd, dev, device)
    del dev  # releases the card
    shown = ", ".join(f"{name} {mhz} MHz" for name, mhz in clocks.items())
    if clocks["AICLK"] <= 0:
        raise CheckFailed(EXIT_CLOCK_ZERO, f"card {device}: AICLK reads 0 MHz, the AI clock is not running ({shown})")
    return f"card {device} healthy: {shown}"


def main(argv):
    try:
        print(check(argv), flush=True)
    except CheckFailed as failed:
        print(f"health_check: {failed}", file=sys.stderr, flush=True)
        return failed.code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
