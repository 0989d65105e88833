// Package ttsysfs reads the health of Tenstorrent cards from the sysfs
// attributes of the tt-kmd driver.
//
// Every card N has a class directory /sys/class/tenstorrent/tenstorrent!N
// (a symlink into /sys/devices, under the card's PCI device) holding the
// ARC firmware's telemetry: clocks (tt_aiclk, tt_axiclk, tt_arcclk, in MHz),
// a heartbeat counter that moves while the firmware is alive
// (tt_heartbeat), the thermal trip count (tt_therm_trip_count) and the
// card's identity (tt_card_type, tt_serial, tt_asic_id, tt_fw_bundle_ver,
// tt_m3app_fw_ver). Its device link leads to the PCI device, whose
// hwmon/hwmon* directory holds the sensors in hwmon's units: temp1 (m°C),
// in0 (mV), curr1 (mA), power1 (µW) and fan1 (RPM), each with _input, _max
// and _label, and name (wormhole, blackhole).
//
// An attribute appears only where the firmware reports it, so a [Reader]
// reads what is there and skips what is not: a missing file, or one the
// driver answers with "no such device" or "not supported", is simply absent
// from the [Card]. Only real read errors (permission, I/O, a value that is
// not a number) are returned, each naming its file, and they never stop the
// other attributes or cards from being read. Values come out in SI units:
// °C, V, A, W, Hz, and RPM for fans.
//
// The reader is cheap enough to run every few seconds over many cards
// (32 cards in about 0.4 ms on a 2-CPU VM): it lists the class directory
// each time, but resolves each card's symlinks and finds its hwmon
// directory once, and keeps each attribute open (20 descriptors a card),
// re-reading it with one pread from offset 0, which makes sysfs produce
// the value afresh: open, read and close by path cost three times as much.
// The ten values that move are read every time; the limits and identity,
// which do not while a card is up, every few reads ([Options.StaticEvery]);
// the hwmon name and labels when the hwmon directory is new. Cards are read
// a few at once ([Options.Workers]). A held attribute whose device went
// away reads as absent (ENODEV, or nothing at all), and a vanished hwmon
// directory is looked for again at the next read.
package ttsysfs
